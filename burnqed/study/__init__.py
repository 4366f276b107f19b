"""Pre-registered multi-seed studies (docs/confirmation.md): the registration and its seeds
(:mod:`burnqed.study.registration`), running the seeds and the report (:mod:`burnqed.study.stage`,
:mod:`burnqed.study.analysis`), the statistics with the seed as the replicate
(:mod:`burnqed.study.stats`)."""
