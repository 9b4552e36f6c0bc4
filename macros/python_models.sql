{#-- Python models run in the adapter's own SparkSession (dbt_paimon/adapter/python_models.py). --#}

{#-- The model's DataFrame (pandas or pandas-on-Spark: converted) as a Spark DataFrame `df`. --#}
{% macro paimon_py_model_frame(compiled_code) %}
{{ compiled_code }}
# --- dbt-paimon: the model's rows as a Spark DataFrame --- #
dbt = dbtObj(spark.table)
df = model(dbt, spark)
import pyspark.sql
if not isinstance(df, pyspark.sql.DataFrame):
    try:
        import pandas
    except ImportError:
        pandas = None
    if hasattr(df, "to_spark"):  # pandas-on-Spark
        df = df.to_spark()
    elif pandas is not None and isinstance(df, pandas.DataFrame):
        df = spark.createDataFrame(df)
    else:
        raise TypeError(f"{type(df)} is not a supported type for a dbt Python model: return a Spark DataFrame")
{% endmacro %}

{#-- A Paimon model (paimon_upsert.sql): the rows become the temporary view the upsert reads. --#}
{% macro paimon_py_temp_view(compiled_code, tmp_relation) %}
{{ paimon_py_model_frame(compiled_code) }}
df.createOrReplaceTempView("{{ tmp_relation }}")
{% endmacro %}

{#-- dbt-spark's `table` materialization writes a Python model's rows with this macro; its default
     format there is delta, which this adapter's Spark has not: the default here is dbt-spark's SQL
     default, parquet. --#}
{% macro py_write_table(compiled_code, target_relation) %}
{{ paimon_py_model_frame(compiled_code) }}
df.write.mode("overwrite").format("{{ config.get('file_format') or 'parquet' }}").option("overwriteSchema", "true").saveAsTable("{{ target_relation }}")
{% endmacro %}
