"""Silver: the customer dimension, and transactions enriched with it and flagged (seed 000, Example #2).

``silver_transactions`` is a stream-static join: every micro-batch of transactions is joined with the
customers view as it is when the batch runs, so an update of a customer applies to the transactions
processed after it, while transactions already in silver keep the values they were flagged with (an
audit trail of why each was, or was not, suspicious).
"""

from pyspark.sql import Window
from pyspark.sql import functions as F

import deltaflow as dp

TRANSACTION_SCHEMA = (
    "transaction_id STRING, customer_id STRING, amount DOUBLE, merchant STRING, tx_timestamp TIMESTAMP"
)


@dp.materialized_view(comment="The customer dimension: the latest update of each customer (by updated_at)")
def customers():
    newest_first = Window.partitionBy("customer_id").orderBy(
        F.col("updated_at").desc(), F.col("ingested_at").desc(), F.col("source_file").desc())
    return (
        spark.read.table("customer_updates")
        .where(F.col("customer_id").isNotNull() & F.col("updated_at").isNotNull())
        .withColumn("_rank", F.row_number().over(newest_first))
        .where("_rank = 1")
        .select("customer_id", "risk_score", "account_age_days", "avg_transaction_amount", "updated_at")
    )


@dp.table(comment="Transactions with their customer's risk profile, flagged by the fraud rules")
def silver_transactions():
    transactions = (
        spark.readStream.table("bronze_transactions")
        .select(F.from_json("value", TRANSACTION_SCHEMA).alias("tx"), "partition", "offset")
        .select("tx.*", "partition", "offset")
        .where(F.col("transaction_id").isNotNull() & F.col("customer_id").isNotNull()
               & F.col("amount").isNotNull())
    )
    profiles = spark.read.table("customers").select(
        "customer_id", "risk_score", "account_age_days", "avg_transaction_amount")
    amount = F.col("amount")
    # The seed's three rules. A customer missing from the dimension has null profile columns: each rule is
    # then null or false, never true, and coalesce makes the flag False rather than null.
    unusual_amount = amount > F.col("avg_transaction_amount") * 5
    risky_customer = F.col("risk_score") > 0.8
    new_account_big_amount = (F.col("account_age_days") < 30) & (amount > 1000)
    return (
        transactions.join(profiles, "customer_id", "left")
        .withColumn("is_suspicious",
                    F.coalesce(unusual_amount | risky_customer | new_account_big_amount, F.lit(False)))
        .withColumn("suspicion_reasons", F.concat_ws(
            ", ",
            F.when(unusual_amount, F.lit("amount > 5x average")),
            F.when(risky_customer, F.lit("risk score > 0.8")),
            F.when(new_account_big_amount, F.lit("new account, amount > 1000")),
        ))
        .select("transaction_id", "customer_id", "amount", "merchant", "tx_timestamp", "risk_score",
                "account_age_days", "avg_transaction_amount", "is_suspicious", "suspicion_reasons",
                "partition", "offset", F.current_timestamp().alias("processed_at"))
    )
