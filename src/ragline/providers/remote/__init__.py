"""Another ragline server as a provider: ``ragline-remote`` store and reranker.

Both are built on :mod:`ragline.client`. The reranker degrades gracefully (spec 000);
the store maps each shard onto a collection of the remote server and each tenant onto
the remote's ``X-Ragline-Tenant`` (so it needs an admin key there).
"""
