"""Resolution: running each flow's function to learn what it reads, and checking the whole graph.

- :mod:`deltaflow.resolve.state`: the resolver at work (the one owner of "the flow under resolution");
  sources ask it, so they never import the resolver itself.
- :mod:`deltaflow.resolve.reads`: the rules of a read (known Delta options, dry-run placeholders).
- :mod:`deltaflow.resolve.resolved`: what resolution learns (flows, kinds, schemas) and the questions asked
  of it (upstream, downstream, order, table properties).
- :mod:`deltaflow.resolve.resolver`: :class:`~deltaflow.resolve.resolver.Resolver`, which does the work.

This package's ``__init__`` imports nothing, so ``import deltaflow`` never loads the resolver.
"""
