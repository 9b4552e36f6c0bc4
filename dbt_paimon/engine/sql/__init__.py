"""Spark SQL on Paimon tables: every Paimon table in Spark's catalog (catalog.py), and the statements
that write one carried out on the table itself (session.py reads them, ddl.py and dml.py run them)."""
