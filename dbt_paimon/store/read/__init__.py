"""Reads: which files a snapshot holds (scan), and their rows merged as a batch read gives them."""
