"""Data: the label policy, real review corpora and the synthetic generators.

- :mod:`~attnbook.data.labels`    -- the one label policy (-1/+1, converted once at
  loading);
- :mod:`~attnbook.data.recipe`    -- the corpus recipe: the same IMDB and Yelp corpora
  from the mirror and the hub (Yelp's seeded sample);
- :mod:`~attnbook.data.sources`   -- loading IMDB and Yelp from the mirror or the hub,
  values checked;
- :mod:`~attnbook.data.reviews`   -- IMDB and Yelp reviews: loading (re-exported),
  tokenizer, vocabulary;
- :mod:`~attnbook.data.splits`    -- one split in memory: texts, labels, stars, its
  tokens (the last splits read are kept);
- :mod:`~attnbook.data.corpus`    -- a review corpus ready for the model (counts,
  labels, splits);
- :mod:`~attnbook.data.synthetic` -- positive / negative / neutral synthetic sequences
  (and K classes);
- :mod:`~attnbook.data.selection` -- data satisfying Assumption 1 exactly, and
  controlled violations;
- :mod:`~attnbook.data.xor`       -- a task whose label depends on a pair of tokens.

Layer: above :mod:`attnbook.engine`; imports nothing else of attnbook.
"""
