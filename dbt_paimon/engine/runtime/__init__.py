"""Where the engine's jobs run: in the driver (local.py) or as a Spark job (distributed.py) behind
one interface (executor.py), their stage functions (tasks.py), the key-index glue, and the deployment
of our code to a cluster's executors."""
