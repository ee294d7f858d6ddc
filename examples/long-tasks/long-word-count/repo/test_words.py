import unittest

from words import word_count


class WordCountTest(unittest.TestCase):
    def test_simple_sentence(self):
        self.assertEqual(word_count("the quick brown fox"), 4)

    def test_repeated_spaces_and_newlines(self):
        self.assertEqual(word_count("  the quick\n brown   fox \n"), 4)

    def test_empty_text(self):
        self.assertEqual(word_count(""), 0)


if __name__ == "__main__":
    unittest.main()
