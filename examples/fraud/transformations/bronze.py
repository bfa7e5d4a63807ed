"""Bronze: raw transactions from Kafka, and raw customer updates from files (seed 000, Example #2)."""

import deltaflow as dp

CUSTOMER_SCHEMA = (
    "customer_id STRING, risk_score DOUBLE, account_age_days INT, avg_transaction_amount DOUBLE, "
    "updated_at TIMESTAMP"
)


@dp.table(comment="Raw card transactions, as received from Kafka")
def bronze_transactions():
    return dp.read_kafka("transactions", max_offsets_per_trigger=50_000)


@dp.table(comment="Every customer update, as received; the customers view keeps the latest per customer")
def customer_updates():
    return dp.read_files(dp.parameter("customers_landing", "landing/customers"), format="json",
                         schema=CUSTOMER_SCHEMA)
