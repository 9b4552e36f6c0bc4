"""Index files: the dynamic-bucket HASH index and deletion vectors (`index-manifest`), and the file
indexes of data files (bloom filter, bitmap)."""
