"""Bronze: every line of every order file, as received, with the file it came from (seed 000)."""

import deltaflow as dp

ORDER_SCHEMA = (
    "order_id STRING, customer_id STRING, product_category STRING, amount DOUBLE, order_timestamp TIMESTAMP"
)


@dp.table(comment="Raw orders from the landing folder; malformed lines kept whole in _corrupt_record")
def bronze_orders():
    return dp.read_files(dp.parameter("orders_landing", "landing/orders"), format="json", schema=ORDER_SCHEMA)
