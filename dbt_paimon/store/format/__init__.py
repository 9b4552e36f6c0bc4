"""Data files: primary-key (KeyValue) files written and read, the column statistics collected while
writing them, and the file formats Paimon writes (Parquet, ORC, Avro)."""
