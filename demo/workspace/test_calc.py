import unittest

from calc import add, average, percent


class CalcTest(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 3), 5)

    def test_average(self):
        self.assertEqual(average([2, 4, 6]), 4)

    def test_average_of_one_value(self):
        self.assertEqual(average([7]), 7)

    def test_average_of_nothing(self):
        self.assertEqual(average([]), 0.0)

    def test_percent(self):
        self.assertEqual(percent(1, 8), 12.5)


if __name__ == "__main__":
    unittest.main()
