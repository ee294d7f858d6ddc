import unittest

from convert import celsius_to_fahrenheit, fahrenheit_to_celsius


class ConvertTest(unittest.TestCase):
    def test_freezing_point(self):
        self.assertAlmostEqual(celsius_to_fahrenheit(0), 32.0)

    def test_boiling_point(self):
        self.assertAlmostEqual(celsius_to_fahrenheit(100), 212.0)

    def test_round_trip(self):
        self.assertAlmostEqual(fahrenheit_to_celsius(celsius_to_fahrenheit(37)), 37.0)


if __name__ == "__main__":
    unittest.main()
