import unittest

from calc import add, mul, shout


class CalcTest(unittest.TestCase):
    def test_mul(self):
        self.assertEqual(mul(2, 3), 6)

    def test_shout_word(self):
        self.assertEqual(shout("hi"), "HI")
