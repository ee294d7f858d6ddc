"""A tiny shopping cart."""


def add_item(item, cart=[]):
    """Return cart with item appended; a new cart when none is given."""
    cart.append(item)
    return cart
