import unittest

from ranges import inclusive_range_sum


class InclusiveRangeSumTest(unittest.TestCase):
    def test_includes_both_ends(self):
        self.assertEqual(inclusive_range_sum(1, 4), 10)

    def test_single_value(self):
        self.assertEqual(inclusive_range_sum(5, 5), 5)

    def test_empty_when_reversed(self):
        self.assertEqual(inclusive_range_sum(4, 1), 0)


if __name__ == "__main__":
    unittest.main()
