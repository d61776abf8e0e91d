import unittest

from stats import median


class HiddenTest(unittest.TestCase):
    def test_two(self):
        self.assertEqual(median([10, 20]), 15)

    def test_unsorted_even(self):
        self.assertEqual(median([9, 1, 5, 7, 3, 11]), 6)
