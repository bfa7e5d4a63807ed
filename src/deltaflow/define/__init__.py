"""What definitions use (``import deltaflow as dp``): datasets, flows, rules, their graph."""
