import unittest

from stats import mean


class MeanTest(unittest.TestCase):
    def test_mean_of_numbers(self):
        self.assertAlmostEqual(mean([1, 2, 3, 4]), 2.5)

    def test_mean_of_empty_list_is_zero(self):
        self.assertEqual(mean([]), 0.0)


if __name__ == "__main__":
    unittest.main()
