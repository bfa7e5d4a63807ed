"""Gold: fraud alerts, the suspicious transactions, for the fraud team's dashboard (seed 000, Example #2)."""

import deltaflow as dp


@dp.table(comment="Suspicious transactions with the rules they broke")
def fraud_alerts():
    return (
        spark.readStream.table("silver_transactions")
        .where("is_suspicious")
        .select("transaction_id", "customer_id", "amount", "merchant", "tx_timestamp", "suspicion_reasons",
                "risk_score", "account_age_days", "avg_transaction_amount", "processed_at")
    )
