-- tips per city: a SQL temporary view read by a SQL materialized view with a join
CREATE TEMPORARY VIEW tips AS
SELECT trip_id, driver_id, city, tip FROM trips_raw WHERE tip IS NOT NULL AND tip > 0;

CREATE MATERIALIZED VIEW tips_by_city
COMMENT 'Tips per city and driver rating band'
PARTITIONED BY (city)
TBLPROPERTIES ('quality' = 'gold', 'team' = 'finance')
AS SELECT t.city, CASE WHEN d.rating >= 4.5 THEN 'top' ELSE 'other' END AS band,
          count(*) AS tips, round(sum(t.tip), 2) AS total
   FROM tips t JOIN drivers d ON t.driver_id = d.driver_id
   GROUP BY 1, 2;

CREATE STREAMING TABLE long_trips (trip_id STRING, city STRING, fare DOUBLE)
COMMENT 'Trips over 40' AS
SELECT trip_id, city, fare FROM STREAM(trips_raw) WHERE fare > 40;

CREATE STREAMING TABLE audit;

CREATE FLOW audit_long AS INSERT INTO audit BY NAME
SELECT trip_id, 'long' AS reason FROM STREAM(long_trips);
