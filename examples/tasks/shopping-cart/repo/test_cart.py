import unittest

from cart import add_item


class AddItemTest(unittest.TestCase):
    def test_new_carts_are_independent(self):
        self.assertEqual(add_item("apple"), ["apple"])
        self.assertEqual(add_item("pear"), ["pear"])

    def test_existing_cart_is_extended(self):
        cart = ["milk"]
        self.assertEqual(add_item("eggs", cart), ["milk", "eggs"])


if __name__ == "__main__":
    unittest.main()
