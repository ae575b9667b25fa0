"""The audit pipeline: plan -> collect (with checkpoints) -> conclude -> verdict, and the exact checks.

* :mod:`.config`: the options (:class:`AuditConfig`) and each unit's test family, typed;
* :mod:`.plan`: units (setting x model pair) and the sample size of each;
* :mod:`.collect`: seeded batches per unit, early stopping, time cap, workers;
* :mod:`.checkpoint`: what was collected, keyed on the implementation and the options;
* :mod:`.conclude`: the tests of each unit, the verdict;
* :mod:`.exact_checks`: the checks that need no statistics (boundary, greedy, differential, seeds);
* :mod:`.run`: ``audit()``, the stages strung together.
"""
