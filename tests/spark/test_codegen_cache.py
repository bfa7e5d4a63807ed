"""The session keeps a pipeline's generated classes compiled from one micro-batch to the next."""

from __future__ import annotations

from deltaflow.runtime.session import session_settings

CODEGEN = {"spark.sql.codegen.wholeStage": "true", "spark.sql.codegen.factoryMode": "FALLBACK"}  # tests': off


def test_more_generated_classes_than_spark_s_hundred_stay_compiled(spark) -> None:  # type: ignore[no-untyped-def]
    # A pipeline's queries and their batches' writes use more generated classes than Spark's default cache
    # of 100 holds; evicted, each was compiled again in the next batch (docs/benchmarks.md, profile).
    metrics = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics

    def plan(factor: int) -> None:  # the driver compiles the query's whole-stage class, no job runs
        df = spark.range(1).selectExpr(f"id * {factor} AS c")  # the literal is in the generated code
        df._jdf.queryExecution().executedPlan().execute()

    with session_settings(spark, CODEGEN):
        compiled = metrics.METRIC_COMPILATION_TIME().getCount()
        for factor in range(1, 131):
            plan(factor)
        assert metrics.METRIC_COMPILATION_TIME().getCount() - compiled >= 130  # one class each, at least
        compiled = metrics.METRIC_COMPILATION_TIME().getCount()
        plan(1)  # the first of the 130: still compiled
        assert metrics.METRIC_COMPILATION_TIME().getCount() == compiled
