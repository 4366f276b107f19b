"""Value functions fitted on the search's own decisions (issue 30 §3, §6).

- :mod:`burnqed.value.frontier`: the choice sets a recorded search faced (the open nodes at each
  pop that is a decision);
- :mod:`burnqed.value.fit`: a conditional-logit fit of per-node features to those decisions,
  cross-fitted by theorem;
- :mod:`burnqed.value.features`: the feature value (goals, hypotheses, goal tokens), a
  :class:`~burnqed.search.value.ValueModel`.

Below the EBM in the layers: it needs only numpy, the records and (the feature value) a tokenizer.
"""
