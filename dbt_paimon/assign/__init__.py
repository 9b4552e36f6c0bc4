"""Bucket assignment as Paimon does it (pure Python + numpy; no Spark): key hashes, BucketAssigner,
ExistingProcessor."""
