"""Stage 2 (seed 004, "deserialize"): typed, validated readings. Schema enforcement belongs here.

A record that is not JSON, misses its sensor or time, or reads outside the sensor's range goes to
``sensor_readings_quarantine`` whole, with the reason; ``deltaflow quarantine replay`` re-feeds it once
the rule is fixed. A bug shipped here is undone with ``deltaflow rewind sensor_readings``.
"""

import deltaflow as dp

READING = "sensor_id STRING, ts TIMESTAMP, temperature_c DOUBLE, humidity DOUBLE, battery_v DOUBLE"


@dp.table(comment="Sensor readings, typed and within each sensor's range")
@dp.expect_or_quarantine("temperature_in_range", "temperature_c BETWEEN -40 AND 85")
@dp.expect_or_quarantine("humidity_in_range", "humidity BETWEEN 0 AND 100")
def sensor_readings():
    raw = spark.readStream.table("raw_sensor_readings")
    return dp.parse_json(raw, READING, column="raw_payload", bytes_column="raw_bytes",
                         required=["sensor_id", "ts"], keep=["topic", "partition", "offset", "kafka_ts"])


@dp.table(comment="Readings above 30 °C, for the on-call dashboard")
def hot_readings():
    return spark.readStream.table("sensor_readings").where("temperature_c > 30")
