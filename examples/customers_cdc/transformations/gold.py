"""Gold: an audit trail of every change to customers, read from its Change Data Feed."""

import deltaflow as dp


@dp.table(comment="Every insert, update and delete of customers, with its commit version and time")
def customers_audit():
    return dp.read_changes("customers", stream=True)
