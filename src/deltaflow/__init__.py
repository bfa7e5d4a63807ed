"""deltaflow: declarative streaming lakehouse pipelines on PySpark + Delta Lake, exactly once.

Definition files use it as ``import deltaflow as dp``::

    import deltaflow as dp

    @dp.table(comment="Raw clickstream, as received")
    def bronze_clicks():
        return dp.read_kafka("clicks")
"""

from deltaflow.define.context import parameter
from deltaflow.define.datasets import (
    append_flow,
    by_window,
    create_auto_cdc_flow,
    create_streaming_table,
    foreach_batch_sink,
    materialized_view,
    table,
    temporary_view,
)
from deltaflow.define.expectations import (
    expect,
    expect_all,
    expect_all_or_drop,
    expect_all_or_fail,
    expect_all_or_quarantine,
    expect_or_drop,
    expect_or_fail,
    expect_or_quarantine,
)
from deltaflow.errors import (
    ConfigError,
    DeltaflowError,
    FlowError,
    GraphError,
    KafkaBrokerError,
    SetupError,
    SinkError,
    SourceError,
)
from deltaflow.parsing import parse_json
from deltaflow.sources.delta import read, read_changes, read_stream
from deltaflow.sources.files import read_files
from deltaflow.sources.kafka import read_kafka

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "DeltaflowError",
    "FlowError",
    "GraphError",
    "KafkaBrokerError",
    "SetupError",
    "SinkError",
    "SourceError",
    "__version__",
    "append_flow",
    "by_window",
    "create_auto_cdc_flow",
    "create_streaming_table",
    "expect",
    "expect_all",
    "expect_all_or_drop",
    "expect_all_or_fail",
    "expect_all_or_quarantine",
    "expect_or_drop",
    "expect_or_fail",
    "expect_or_quarantine",
    "foreach_batch_sink",
    "materialized_view",
    "parameter",
    "parse_json",
    "read",
    "read_changes",
    "read_files",
    "read_kafka",
    "read_stream",
    "table",
    "temporary_view",
]
