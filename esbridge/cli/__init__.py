"""The ``esbridge`` command (:func:`esbridge.cli.main.main`): its parser in :mod:`esbridge.cli.main`, one
module per command or family of commands — :mod:`~esbridge.cli.engine` (``engine``), :mod:`~esbridge.cli.index`
(``index``, ``indices``), :mod:`~esbridge.cli.search` (``search``, ``rescore``, ``scorers``),
:mod:`~esbridge.cli.demo` (``demo``), :mod:`~esbridge.cli.eval` (``eval``, ``run``, ``tune``),
:mod:`~esbridge.cli.features` (``features``), :mod:`~esbridge.cli.plugin` (``plugin``) and
:mod:`~esbridge.cli.serve` (``serve``) — and the options they share in :mod:`~esbridge.cli.options`."""
