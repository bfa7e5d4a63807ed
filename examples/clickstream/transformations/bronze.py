"""Bronze: every Kafka record of `clicks`, raw, with its topic/partition/offset (seed 004 style)."""

import deltaflow as dp


@dp.table(comment="Raw clickstream events, as received from Kafka")
def bronze_clicks():
    return dp.read_kafka("clicks", max_offsets_per_trigger=50_000)
