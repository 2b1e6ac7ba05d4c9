"""The ``esbridge`` command (:func:`esbridge.cli.main.main`): its parser in :mod:`esbridge.cli.main`, the
commands in :mod:`~esbridge.cli.index`, :mod:`~esbridge.cli.search`, :mod:`~esbridge.cli.eval` and
:mod:`~esbridge.cli.features`, the options they share in :mod:`~esbridge.cli.options`."""
