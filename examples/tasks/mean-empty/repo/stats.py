"""Small statistics helpers."""


def mean(values):
    """Arithmetic mean of a list of numbers; 0.0 for an empty list."""
    return sum(values) / len(values)
