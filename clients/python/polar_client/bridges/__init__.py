"""Thin bridges from Polar groups to trainer frameworks (slime, verl). The frameworks are imported lazily: these
modules import without them, and their conversion functions are plain Python."""
