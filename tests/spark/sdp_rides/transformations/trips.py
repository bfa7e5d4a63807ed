from pyspark import pipelines as dp
from pyspark.sql import functions as F

TRIP = "trip_id STRING, driver_id STRING, city STRING, fare DOUBLE, tip DOUBLE, started_at TIMESTAMP"
landing = spark.conf.get("rides.landing")


@dp.table(comment="Trips as they land", partition_cols=["trip_date"], table_properties={"quality": "bronze"})
def trips_raw():
    return (spark.readStream.format("json").schema(TRIP).load(f"{landing}/trips")
            .withColumn("trip_date", F.to_date("started_at")))


@dp.materialized_view(comment="Drivers, from their latest file")
def drivers():
    return spark.read.format("json").schema("driver_id STRING, name STRING, rating DOUBLE").load(
        f"{landing}/drivers")


dp.create_streaming_table("trip_events", comment="Starts and payments, two flows into one table")


@dp.append_flow(target="trip_events")
def starts():
    return spark.readStream.table("trips_raw").select("trip_id", F.lit("start").alias("kind"), "started_at")


@dp.append_flow(target="trip_events", name="payments")
def paid():
    return (spark.readStream.table("trips_raw").where("fare IS NOT NULL")
            .select("trip_id", F.lit("paid").alias("kind"), "started_at"))


@dp.temporary_view
def fair_trips():
    return spark.read.table("trips_raw").where(F.col("fare") >= float(spark.conf.get("rides.min_fare")))


@dp.materialized_view(partition_cols=["city"], table_properties={"quality": "gold"})
def driver_earnings():
    return spark.sql("""
        SELECT t.city, d.name AS driver, count(*) AS trips,
               round(sum(t.fare + coalesce(t.tip, 0)), 2) AS earned
        FROM fair_trips t JOIN drivers d ON t.driver_id = d.driver_id
        GROUP BY t.city, d.name""")
