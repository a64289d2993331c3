"""Data: the built-in data sets, the user's own files and loaders, and how samples are split over clients."""
