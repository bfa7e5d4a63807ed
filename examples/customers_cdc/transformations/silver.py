"""Silver: parse the change events, then keep the customers up to date (SCD 1) and their history (SCD 2).

One declaration per target replaces a hand-written foreachBatch + MERGE: the latest event per customer wins
within a batch, an older event never overwrites a newer one, a delete is not undone by a late insert, and a
batch replayed after a crash changes nothing.
"""

from pyspark.sql import functions as F

import deltaflow as dp

CHANGE = ("customer_id STRING, op STRING, seq BIGINT, name STRING, email STRING, tier STRING, "
          "city STRING, updated_at TIMESTAMP")


@dp.table(comment="Customer change events, parsed")
def customer_changes():
    return (spark.readStream.table("bronze_customer_changes")
            .select(F.from_json(F.col("value").cast("string"), CHANGE).alias("e"))
            .select("e.*"))


dp.create_streaming_table("customers", comment="The latest row per customer (SCD type 1)",
                          table_properties={"delta.enableChangeDataFeed": "true"})
dp.create_auto_cdc_flow(
    target="customers", source="customer_changes", keys=["customer_id"], sequence_by="seq",
    apply_as_deletes="op = 'DELETE'", except_column_list=["op"],
)

dp.create_streaming_table("customers_history", comment="Every version of every customer (SCD type 2)")
dp.create_auto_cdc_flow(
    target="customers_history", source="customer_changes", keys=["customer_id"], sequence_by="seq",
    apply_as_deletes="op = 'DELETE'", except_column_list=["op"], stored_as_scd_type=2,
    name="customers_history_flow",
)
