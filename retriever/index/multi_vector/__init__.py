"""Multi-vector (late-interaction) index folders, ``mv/`` beside an encoded index's shards: the encoder a
multi-vector model indexes with (:mod:`.encode`), the residual codec (:mod:`.codec`), the resumable build
(:mod:`.build`), the one validated reader of the files (:mod:`.files`), the search-time store (:mod:`.store`) and
``hopscotch index --plan``'s sizes (:mod:`.plan`)."""
