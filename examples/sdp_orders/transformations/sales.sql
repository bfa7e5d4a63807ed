-- Gold, in SQL: orders and revenue per product category.
CREATE MATERIALIZED VIEW sales_by_category
COMMENT 'Orders and revenue per product category'
AS SELECT product_category, count(*) AS order_count, round(sum(amount), 2) AS revenue
   FROM orders_silver
   GROUP BY product_category
