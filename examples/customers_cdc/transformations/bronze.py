"""Bronze: the change events exactly as they arrive, with their Kafka coordinates."""

import deltaflow as dp


@dp.table(comment="Customer change events from Kafka, raw")
def bronze_customer_changes():
    return dp.read_kafka(dp.parameter("source_topic"))
