"""Models: the built-in ones, the user's own modules, their state as flat vectors and their cost in FLOPs."""
