"""The only code that talks to models, for judges and model targets alike.

``client`` (a model client: store, budget, retries, usage), ``transports`` (lean aiohttp, litellm),
``reply`` (a reply, with its call's tokens and cost as far as known), ``retry`` (the one retry
policy), ``usage`` (one token and cost counter, also for estimates),
``prices`` (litellm's price table, read without importing litellm), ``replay`` (the record and
replay store), ``budget`` (the run's spend ledger) and ``limits`` (calls in flight and each
model's pace, from the options and the provider's rate-limit headers). Importing this package
imports none of aiohttp or litellm: a replayed run never needs them.
"""
