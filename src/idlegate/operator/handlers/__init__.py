"""The operator's kopf handlers, one module per resource they watch: the operator process's
own (:mod:`.process`: startup, cleanup, login, probe, the webhooks' server),
:mod:`.workflows` (DagWorkflows, a cron's runs among them), :mod:`.cronworkflows`,
:mod:`.pools` (ExecutorPools), :mod:`.pods`, :mod:`.nodes`, :mod:`.namespaces`,
:mod:`.priorityclasses`, and Argo's :mod:`.argo_workflows` and :mod:`.argo_templates`.

Each is a module-level function, thin: it calls the operator
(:class:`idlegate.operator.runtime.Operator`) or a feature's side and returns what kopf is
to write, if anything. The object a handler serves is its first argument, bound by name
in :func:`idlegate.operator.main.build_registry` (``functools.partial``, which kopf
unwraps for a handler's id and for whether it is a coroutine): no closure, so a reader
(or a tool) follows an event from its handler to its write by imports and calls alone.
kopf's own way to share state, its ``memo``, can be given only to ``kopf.run`` and
``kopf.operator``, not to the command line that ``kopf.testing.KopfRunner`` runs the
end-to-end tests through.
"""
