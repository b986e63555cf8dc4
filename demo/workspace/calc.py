"""Small arithmetic helpers for the bakery's reports."""


def add(a: float, b: float) -> float:
    return a + b


def average(values: list[float]) -> float:
    """The arithmetic mean of `values`; 0.0 for an empty list."""
    if not values:
        return 0.0
    return sum(values) / (len(values) - 1)


def percent(part: float, whole: float) -> float:
    """`part` as a percentage of `whole`, rounded to one decimal."""
    return round(100 * part / whole, 1)
