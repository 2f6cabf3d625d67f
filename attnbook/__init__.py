"""attnbook: one-layer softmax attention with trained embeddings, in code.

The package holds every computation the book's chapters run, in layers; a module imports
only from its own layer and the layers listed before it:

- :mod:`attnbook.validation`  -- the argument checks of every entry point (imports
  nothing of attnbook);
- :mod:`attnbook.runtime`     -- seeding, device and machine (imports nothing of
  attnbook);
- :mod:`attnbook.engine`      -- token counts and the count engine's passes over memory;
- :mod:`attnbook.data`        -- the label policy, review corpora, synthetic generators;
- :mod:`attnbook.models`      -- the models, the one initializer, losses, the training
  loop;
- :mod:`attnbook.theory`      -- frequency, one step, max margin, gradient flow;
- :mod:`attnbook.experiments` -- token importance, the real-data experiment, the
  extensions;
- :mod:`attnbook.book`        -- chapter start, glue and checks, records, figures,
  tables;

The benchmark of the engine against the usual implementation is not part of the
package: it lives in the repository's ``benchmarks/`` (``python -m benchmarks``).
"""

__version__ = "0.2.0"
