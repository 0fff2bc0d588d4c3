"""Train a Hopscotch dual encoder from a recipe (see retriever/training/trainer.py and docs/training.md).

    python train.py --recipe recipes/minilm_hotpot.yaml --output runs/minilm [key=value ...]
    accelerate launch --config_file configs/accelerate/multi_gpu.yaml train.py --recipe R --output DIR
"""

import sys

from hopscotch.retriever.training.trainer import main

if __name__ == "__main__":
    sys.exit(main())
