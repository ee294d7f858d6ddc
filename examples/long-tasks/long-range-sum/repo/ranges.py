"""Integer range helpers."""


def inclusive_range_sum(start, stop):
    """Sum of every integer from start to stop, both ends included."""
    if stop < start:
        return 0
    return sum(range(start, stop))
