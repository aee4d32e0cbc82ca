"""Exports the PyTorch corpus: real architectures, written by torch.onnx.export, with seeded random weights.

Each model goes to OUT/<name>/ as model.onnx (a prefill/decode pair as prefill.onnx and decode.onnx), one seeded
input set per graph (inputs/ or <graph>_inputs/: input_<i>.npy in the graph's input order), and meta.json, which
records the script's hash, the versions, the ctxgen binding arguments, the export time and the torch outputs'
magnitudes. A model whose meta.json carries this script's hash is kept (safe to run again); any edit of this file
exports everything again. Deterministic: fixed seeds, eval mode, BatchNorm affine parameters set to seeded values
and running statistics re-estimated on seeded batches (random init otherwise shrinks logits to ~1e-14), no
downloads (weights=None and weights_backbone=None everywhere).

Needs torch 1.13, torchvision 0.14 and torchaudio 0.13 (Debian 12: python3-torch, python3-torchvision,
python3-torchaudio, for /usr/bin/python3); scripts/export_corpus.sh finds the interpreter.
usage: export_corpus.py OUT_DIR [NAME...]   (default: every model)
"""
import hashlib
import json
import math
import os
import sys
import tempfile
import time
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchaudio
import torchvision

SCRIPT_HASH = hashlib.sha256(open(__file__, "rb").read()).hexdigest()[:16]


# ---- deterministic weights -----------------------------------------------------------------------------------------

def seeded_batchnorm(model, batches, seed, run=None):
    """Gives every BatchNorm seeded affine parameters, then re-estimates its running statistics on seeded batches
    (cumulative average, BatchNorm layers alone in train mode), so that eval-mode activations stay of order 1."""
    g = torch.Generator().manual_seed(seed)
    norms = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    with torch.no_grad():
        for m in norms:
            if m.affine:
                m.weight.copy_(torch.rand(m.weight.shape, generator=g) * 0.6 + 0.7)
                m.bias.copy_(torch.rand(m.bias.shape, generator=g) * 0.4 - 0.2)
            m.reset_running_stats()
            m.momentum = None  # cumulative average over the batches
    model.eval()
    for m in norms:
        m.train()
    with torch.no_grad():
        for b in batches:
            (run or model)(b)
    model.eval()


def image_batches(seed, count, shape):
    g = torch.Generator().manual_seed(seed)
    return [torch.rand(shape, generator=g) for _ in range(count)]


# ---- the models ----------------------------------------------------------------------------------------------------

class Classifier(nn.Module):
    """A torchvision classifier; logits only."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x):
        return self.net(x)


class Segmenter(nn.Module):
    """torchvision's segmentation models return a dict; ONNX gets its "out" tensor."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x):
        return self.net(x)["out"]


class Detector(nn.Module):
    """A torchvision detector on one image batch of 1: boxes, scores and labels of that image."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x):
        out = self.net([x[0]])[0]
        return out["boxes"], out["scores"], out["labels"]


class Bert(nn.Module):
    """A BERT-like text encoder: token, position and segment embeddings, post-norm nn.TransformerEncoder with GELU,
    a key padding mask from attention_mask (1 keep, 0 pad), a tanh pooler on the first token and a classifier."""

    def __init__(self, vocab=1000, dim=128, heads=4, layers=2, ff=512, max_len=128, classes=3):
        super().__init__()
        self.tokens = nn.Embedding(vocab, dim)
        self.positions = nn.Embedding(max_len, dim)
        self.segments = nn.Embedding(2, dim)
        self.norm = nn.LayerNorm(dim, eps=1e-12)
        layer = nn.TransformerEncoderLayer(dim, heads, ff, dropout=0.1, activation="gelu", batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.pool = nn.Linear(dim, dim)
        self.classify = nn.Linear(dim, classes)

    def forward(self, input_ids, attention_mask, token_type_ids):
        seq = input_ids.shape[1]
        pos = torch.arange(seq, device=input_ids.device).unsqueeze(0)
        h = self.norm(self.tokens(input_ids) + self.positions(pos) + self.segments(token_type_ids))
        h = self.encoder(h, src_key_padding_mask=attention_mask == 0)
        pooled = torch.tanh(self.pool(h[:, 0]))
        return h, self.classify(pooled)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class DecoderBlock(nn.Module):
    """A Llama-style block: RMSNorm, attention with RoPE and an explicit KV cache, RMSNorm, SwiGLU MLP."""

    def __init__(self, dim, heads, ff):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.attn_norm = RMSNorm(dim)
        self.q = nn.Linear(dim, dim, bias=False)
        self.k = nn.Linear(dim, dim, bias=False)
        self.v = nn.Linear(dim, dim, bias=False)
        self.o = nn.Linear(dim, dim, bias=False)
        self.mlp_norm = RMSNorm(dim)
        self.gate = nn.Linear(dim, ff, bias=False)
        self.up = nn.Linear(dim, ff, bias=False)
        self.down = nn.Linear(ff, dim, bias=False)

    def forward(self, x, cos, sin, mask, past_k, past_v):
        b, s, d = x.shape
        h = self.attn_norm(x)
        q = self.q(h).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.k(h).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        v = self.v(h).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if past_k is not None:
            k = torch.cat((past_k, k), dim=2)
            v = torch.cat((past_v, v), dim=2)
        scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.head_dim)
        if mask is not None:
            scores = scores.masked_fill(mask, float("-inf"))
        a = torch.matmul(torch.softmax(scores, dim=-1), v).transpose(1, 2).reshape(b, s, d)
        x = x + self.o(a)
        h = self.mlp_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h)), k, v


class TinyLlama(nn.Module):
    """A decoder LLM with tied embeddings and RoPE. decode=False: prefill (input_ids only, a causal mask, present
    key/value outputs); decode=True: one step after a cache of past_seq tokens (past_key_<i>/past_value_<i> inputs)."""

    def __init__(self, vocab=512, dim=128, heads=4, layers=2, ff=352, decode=False):
        super().__init__()
        self.decode, self.layers_count = decode, layers
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(DecoderBlock(dim, heads, ff) for _ in range(layers))
        self.norm = RMSNorm(dim)
        head_dim = dim // heads
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, head_dim, 2).float() / head_dim)),
                             persistent=False)

    def forward(self, input_ids, *past):
        b, s = input_ids.shape
        start = past[0].shape[2] if self.decode else 0
        pos = torch.arange(s, device=input_ids.device).float() + start
        freqs = pos[:, None] * self.inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos()[None, None], emb.sin()[None, None]
        mask = None
        if not self.decode:
            mask = torch.ones(s, s, dtype=torch.bool, device=input_ids.device).triu(1)[None, None]
        x = self.embed(input_ids)
        presents = []
        for i, block in enumerate(self.blocks):
            pk, pv = (past[2 * i], past[2 * i + 1]) if self.decode else (None, None)
            x, k, v = block(x, cos, sin, mask, pk, pv)
            presents += [k, v]
        logits = torch.matmul(self.norm(x), self.embed.weight.t())
        return (logits, *presents)


# ---- exporting -----------------------------------------------------------------------------------------------------

def save_npy_dir(path, tensors):
    os.makedirs(path, exist_ok=True)
    for i, t in enumerate(tensors):
        np.save(os.path.join(path, f"input_{i}.npy"), t.detach().numpy())


def magnitudes(outputs):
    """Each output's shape, largest magnitude and spread. An output of several values that are all equal (a zeroed
    head) is refused: a comparison with it could not tell a wrong compile from a right one."""
    found = [{"shape": list(o.shape), "max_abs": float(o.detach().abs().max()) if o.numel() else 0.0,
              "std": float(o.detach().float().std()) if o.numel() > 1 else 0.0} for o in outputs]
    for i, (o, m) in enumerate(zip(outputs, found)):
        if o.numel() > 1 and o.dtype.is_floating_point and m["std"] == 0.0:
            raise ValueError(f"output {i} (shape {m['shape']}) holds one value {m['max_abs']} everywhere")
    return found


def export_graph(module, args, path, input_names, output_names, dynamic_axes, opset):
    """torch.onnx.export with constant folding. Autograd stays enabled: under torch.no_grad() torch 1.13 takes
    nn.TransformerEncoder's fused fast path, which it cannot export."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, path, opset_version=opset, do_constant_folding=True,
                          input_names=input_names, output_names=output_names, dynamic_axes=dynamic_axes)
    with torch.no_grad():
        out = module(*args)
    return out if isinstance(out, (tuple, list)) else (out,)


def image_model(name, family, net, shape, opset, seed, wrap=Classifier, bn_shape=None, note=""):
    """A classifier, segmenter or detector: one image input with a dynamic batch (bound to 1)."""

    def build(out_dir):
        torch.manual_seed(seed)
        model = wrap(net())
        run = detector_features(model.net) if wrap is Detector else None
        seeded_batchnorm(model, image_batches(seed + 1, 3, bn_shape or (4, *shape[1:])), seed + 2, run)
        x = image_batches(seed + 3, 1, shape)[0]
        axes = {"input": {0: "batch"}} if wrap is not Detector else None
        names = ["boxes", "scores", "labels"] if wrap is Detector else ["output"]
        outs = export_graph(model, (x,), os.path.join(out_dir, "model.onnx"), ["input"], names, axes, opset)
        save_npy_dir(os.path.join(out_dir, "inputs"), [x])
        graph = {"args": ["--dim", "batch=1"] if axes else [], "outputs": magnitudes(outs)}
        if wrap is Detector:
            # Detections sorted by score: two with scores a few ulp apart may come out in either order.
            graph["compare"] = "detections"
        return {"graphs": {"model": graph}}

    return dict(name=name, family=family, build=build, source=f"torchvision {torchvision.__version__}", note=note,
                shape=shape)


def detector_features(net):
    """The BatchNorm-holding part of a torchvision detector (its transform, backbone and, for SSD, head) on all
    images of a batch: the whole eager forward, box decoding and NMS included, would take ten times longer."""

    def run(batch):
        images, _ = net.transform(list(batch))
        features = net.backbone(images.tensors)
        if hasattr(net, "anchor_generator") and hasattr(net, "head"):  # SSD: its head has BatchNorm too
            net.head(list(features.values()))

    return run


def tv(fn, **kw):
    return lambda: fn(weights=None, **kw)


def vit_small():
    """A small ViT. torchvision zeroes its classification head, which made every logit 0: seeded instead."""
    from torchvision.models.vision_transformer import VisionTransformer

    model = VisionTransformer(image_size=64, patch_size=16, num_layers=2, num_heads=4, hidden_dim=128, mlp_dim=256,
                              num_classes=100)
    torch.nn.init.normal_(model.heads.head.weight, std=0.2)
    torch.nn.init.normal_(model.heads.head.bias, std=0.2)
    return model


def wav2vec2(out_dir):
    """torchaudio's wav2vec2 (the model class of wav2vec2_base, a small config): group-norm conv feature extractor,
    convolutional positional embedding, post-norm transformer layers, a CTC head. Dynamic batch and samples."""
    torch.manual_seed(400)
    model = torchaudio.models.wav2vec2_model(
        extractor_mode="group_norm", extractor_conv_layer_config=[(64, 10, 5)] + [(64, 3, 2)] * 4 + [(64, 2, 2)] * 2,
        extractor_conv_bias=False, encoder_embed_dim=128, encoder_projection_dropout=0.0,
        encoder_pos_conv_kernel=32, encoder_pos_conv_groups=4, encoder_num_layers=2, encoder_num_heads=4,
        encoder_attention_dropout=0.0, encoder_ff_interm_features=256, encoder_ff_interm_dropout=0.0,
        encoder_dropout=0.0, encoder_layer_norm_first=False, encoder_layer_drop=0.0, aux_num_out=32).eval()
    g = torch.Generator().manual_seed(401)
    t = torch.arange(16000).float() / 16000
    wave = (0.5 * torch.sin(2 * math.pi * 220 * t) + 0.1 * torch.randn(16000, generator=g))[None]

    class Emissions(nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, w):
            return self.m(w)[0]

    wrapped = Emissions(model).eval()
    outs = export_graph(wrapped, (wave,), os.path.join(out_dir, "model.onnx"), ["waveform"], ["emissions"],
                        {"waveform": {0: "batch", 1: "samples"}, "emissions": {0: "batch", 1: "frames"}}, 14)
    save_npy_dir(os.path.join(out_dir, "inputs"), [wave])
    return {"graphs": {"model": {"args": ["--dim", "batch=1", "--dim", "samples=16000"], "outputs": magnitudes(outs)}}}


def bert(out_dir):
    torch.manual_seed(500)
    model = Bert().eval()
    g = torch.Generator().manual_seed(501)
    seq = 32
    ids = torch.randint(0, 1000, (1, seq), generator=g)
    mask = torch.ones(1, seq, dtype=torch.int64)
    mask[:, 24:] = 0  # 8 padding tokens
    types = torch.zeros(1, seq, dtype=torch.int64)
    types[:, 12:] = 1
    axes = {n: {0: "batch", 1: "seq"} for n in ("input_ids", "attention_mask", "token_type_ids", "hidden")}
    axes["logits"] = {0: "batch"}
    outs = export_graph(model, (ids, mask, types), os.path.join(out_dir, "model.onnx"),
                        ["input_ids", "attention_mask", "token_type_ids"], ["hidden", "logits"], axes, 14)
    save_npy_dir(os.path.join(out_dir, "inputs"), [ids, mask, types])
    return {"graphs": {"model": {"args": ["--dim", "batch=1", "--dim", f"seq={seq}"], "outputs": magnitudes(outs)}}}


def llama_pair(out_dir):
    """The same weights exported twice: prefill of 16 tokens from an empty cache, then one decode step after them
    (the decode inputs are torch's prefill outputs and the greedy next token)."""
    torch.manual_seed(600)
    prefill = TinyLlama().eval()
    decode = TinyLlama(decode=True).eval()
    decode.load_state_dict(prefill.state_dict())
    layers = prefill.layers_count
    g = torch.Generator().manual_seed(601)
    n = 16
    ids = torch.randint(0, 512, (1, n), generator=g)
    kv = [f"{kind}_{i}" for i in range(layers) for kind in ("key", "value")]
    axes = {"input_ids": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"}}
    axes.update({f"present_{k}": {0: "batch", 2: "total_seq"} for k in kv})
    outs = export_graph(prefill, (ids,), os.path.join(out_dir, "prefill.onnx"), ["input_ids"],
                        ["logits"] + [f"present_{k}" for k in kv], axes, 14)
    save_npy_dir(os.path.join(out_dir, "prefill_inputs"), [ids])
    next_id = outs[0][:, -1:].argmax(-1)
    past = [o.detach() for o in outs[1:]]
    axes = {"input_ids": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"}}
    axes.update({f"past_{k}": {0: "batch", 2: "past_seq"} for k in kv})
    axes.update({f"present_{k}": {0: "batch", 2: "total_seq"} for k in kv})
    douts = export_graph(decode, (next_id, *past), os.path.join(out_dir, "decode.onnx"),
                         ["input_ids"] + [f"past_{k}" for k in kv], ["logits"] + [f"present_{k}" for k in kv], axes,
                         14)
    save_npy_dir(os.path.join(out_dir, "decode_inputs"), [next_id, *past])
    return {"graphs": {
        "prefill": {"args": ["--dim", "batch=1", "--dim", f"seq={n}"], "outputs": magnitudes(outs)},
        "decode": {"args": ["--dim", "batch=1", "--dim", "seq=1", "--dim", f"past_seq={n}"],
                   "outputs": magnitudes(douts)}}}


def fixed_model(name, family, source, make, inputs, input_names, output_names, opset=14, seed=700):
    """A sequence or audio model with fixed input shapes (no binding arguments): `make()` builds it in eval mode,
    `inputs(generator)` gives its seeded inputs."""

    def build(out_dir):
        torch.manual_seed(seed)
        model = make().eval()
        args = inputs(torch.Generator().manual_seed(seed + 1))
        outs = export_graph(model, args, os.path.join(out_dir, "model.onnx"), input_names, output_names, None, opset)
        save_npy_dir(os.path.join(out_dir, "inputs"), list(args))
        return {"graphs": {"model": {"args": [], "outputs": magnitudes(outs)}}}

    return dict(name=name, family=family, build=build, source=source)


class RaftFlow(nn.Module):
    """torchvision's RAFT (small) with 3 refinement steps: the last flow estimate. At 128x128 (not less: at 64x64 the
    correlation pyramid's last level is 1 pixel wide, the lookup divides by W - 1 = 0 and PyTorch itself gives NaN)."""

    def __init__(self):
        super().__init__()
        self.m = torchvision.models.optical_flow.raft_small(weights=None)

    def forward(self, image1, image2):
        return self.m(image1, image2, num_flow_updates=3)[-1]


class FirstOutput(nn.Module):
    """A module returning a tuple or extra state, reduced to its first output."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, *args):
        return self.m(*args)[0]


class LstmGru(nn.Module):
    """A recurrent tagger: two bidirectional LSTM layers, a GRU, a linear head (ONNX LSTM and GRU nodes)."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(40, 64, num_layers=2, bidirectional=True, batch_first=True)
        self.gru = nn.GRU(128, 32, batch_first=True)
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        y, _ = self.lstm(x)
        y, _ = self.gru(y)
        return self.head(y)


class Seq2Seq(nn.Module):
    """nn.Transformer: encoder and decoder with cross-attention and a causal target mask."""

    def __init__(self):
        super().__init__()
        self.t = nn.Transformer(d_model=64, nhead=4, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=128,
                                dropout=0.0, batch_first=True)

    def forward(self, src, tgt):
        return self.t(src, tgt, tgt_mask=self.t.generate_square_subsequent_mask(tgt.shape[1]))


def fcos_resnet18():
    """torchvision's FCOS (anchor-free, GroupNorm head) on a ResNet-18 FPN with P6/P7, small images."""
    from torchvision.models.detection import FCOS
    from torchvision.models.detection.backbone_utils import _resnet_fpn_extractor
    from torchvision.ops.feature_pyramid_network import LastLevelP6P7
    backbone = _resnet_fpn_extractor(torchvision.models.resnet18(weights=None), 5, returned_layers=[2, 3, 4],
                                     extra_blocks=LastLevelP6P7(256, 256))
    return FCOS(backbone, num_classes=21, min_size=128, max_size=128, score_thresh=0.05)


def models():
    from torchvision.models import detection, segmentation
    from torchvision.models.convnext import CNBlockConfig, ConvNeXt
    from torchvision.models.swin_transformer import SwinTransformer
    wide = [  # more architectures of each family (issue 27: the wide corpus); small sizes keep CI short
        image_model("densenet121", "CNN classifier (dense concatenation)", tv(torchvision.models.densenet121),
                    (1, 3, 64, 64), 13, 130),
        image_model("googlenet", "CNN classifier (inception)",
                    tv(torchvision.models.googlenet, aux_logits=False, init_weights=True), (1, 3, 96, 96), 13, 131),
        image_model("shufflenet_v2_x1_0", "CNN classifier (channel shuffle)", tv(torchvision.models.shufflenet_v2_x1_0),
                    (1, 3, 96, 96), 13, 132),
        image_model("squeezenet1_1", "CNN classifier (fire modules, ceil-mode pooling)",
                    tv(torchvision.models.squeezenet1_1), (1, 3, 96, 96), 13, 133),
        image_model("mnasnet0_5", "CNN classifier (NAS mobile)", tv(torchvision.models.mnasnet0_5), (1, 3, 96, 96),
                    13, 134),
        image_model("regnet_y_400mf", "CNN classifier (grouped conv, squeeze-excite)",
                    tv(torchvision.models.regnet_y_400mf), (1, 3, 96, 96), 13, 135),
        image_model("mobilenet_v2", "CNN classifier (inverted residuals, ReLU6)", tv(torchvision.models.mobilenet_v2),
                    (1, 3, 96, 96), 13, 136),
        image_model("convnext_small_config", "CNN classifier (ConvNeXt: 7x7 depthwise, LayerNorm, GELU)",
                    lambda: ConvNeXt([CNBlockConfig(32, 64, 2), CNBlockConfig(64, 128, 2), CNBlockConfig(128, None, 2)],
                                     layer_scale=0.5, num_classes=100), (1, 3, 64, 64), 14, 137),
        image_model("swin_small_config", "vision transformer (shifted windows)",
                    lambda: SwinTransformer(patch_size=[4, 4], embed_dim=32, depths=[2, 2], num_heads=[2, 4],
                                            window_size=[4, 4], num_classes=100), (1, 3, 64, 64), 14, 138),
        image_model("vit_small_config", "vision transformer (ViT)", vit_small, (1, 3, 64, 64), 14, 139),
        image_model("deeplabv3_mobilenet_v3_large", "segmenter (dilated ASPP)",
                    tv(segmentation.deeplabv3_mobilenet_v3_large, weights_backbone=None, num_classes=21,
                       aux_loss=False), (1, 3, 96, 96), 13, 210, wrap=Segmenter),
        image_model("fcos_resnet18_fpn", "anchor-free detector", fcos_resnet18, (1, 3, 128, 128), 13, 320,
                    wrap=Detector, bn_shape=(2, 3, 128, 128)),
        fixed_model("conformer", "speech encoder (Conformer)", f"torchaudio {torchaudio.__version__}",
                    lambda: FirstOutput(torchaudio.models.Conformer(input_dim=80, num_heads=4, ffn_dim=128,
                                                                    num_layers=2, depthwise_conv_kernel_size=15)),
                    lambda g: (torch.randn(1, 50, 80, generator=g), torch.tensor([50])), ["features", "lengths"],
                    ["encoded"], seed=410),
        fixed_model("convtasnet", "speech separation (Conv-TasNet: dilated 1-D convs, PReLU)",
                    f"torchaudio {torchaudio.__version__}",
                    lambda: torchaudio.models.ConvTasNet(num_sources=2, enc_kernel_size=16, enc_num_feats=64,
                                                         msk_kernel_size=3, msk_num_feats=32, msk_num_hidden_feats=64,
                                                         msk_num_layers=3, msk_num_stacks=2),
                    lambda g: (torch.randn(1, 1, 4000, generator=g),), ["mixture"], ["sources"], seed=420),
        fixed_model("lstm_gru", "recurrent tagger (LSTM, GRU)", "nn.LSTM, nn.GRU", LstmGru,
                    lambda g: (torch.randn(1, 30, 40, generator=g),), ["features"], ["tags"], seed=510),
        fixed_model("raft_small", "optical flow (RAFT: correlation pyramid, GridSample lookups, ConvGRU)",
                    f"torchvision {torchvision.__version__}", RaftFlow,
                    lambda g: (torch.rand(1, 3, 128, 128, generator=g), torch.rand(1, 3, 128, 128, generator=g)),
                    ["image1", "image2"], ["flow"], opset=16, seed=530),
        fixed_model("transformer_seq2seq", "encoder-decoder transformer", "nn.Transformer", Seq2Seq,
                    lambda g: (torch.randn(1, 12, 64, generator=g), torch.randn(1, 9, 64, generator=g)),
                    ["source", "target"], ["decoded"], seed=520),
    ]
    return [
        image_model("resnet18", "CNN classifier", tv(torchvision.models.resnet18), (1, 3, 112, 112), 13, 100),
        image_model("mobilenet_v3_small", "CNN classifier", tv(torchvision.models.mobilenet_v3_small),
                    (1, 3, 128, 128), 13, 110),
        image_model("efficientnet_b0", "CNN classifier", tv(torchvision.models.efficientnet_b0), (1, 3, 112, 112), 17,
                    120),
        image_model("lraspp_mobilenet_v3_large", "segmenter",
                    tv(segmentation.lraspp_mobilenet_v3_large, weights_backbone=None, num_classes=21),
                    (1, 3, 128, 128), 13, 200, wrap=Segmenter),
        image_model("ssdlite320_mobilenet_v3_large", "one-stage detector",
                    tv(detection.ssdlite320_mobilenet_v3_large, weights_backbone=None, num_classes=21),
                    (1, 3, 160, 160), 13, 300, wrap=Detector, bn_shape=(4, 3, 160, 160)),
        image_model("fasterrcnn_mobilenet_v3_large_320_fpn", "two-stage detector",
                    tv(detection.fasterrcnn_mobilenet_v3_large_320_fpn, weights_backbone=None, num_classes=21,
                       box_score_thresh=0.005),
                    (1, 3, 160, 160), 13, 310, wrap=Detector, bn_shape=(4, 3, 160, 160)),
        dict(name="wav2vec2", family="speech transformer", build=wav2vec2,
             source=f"torchaudio {torchaudio.__version__}"),
        dict(name="bert", family="text transformer", build=bert, source="nn.TransformerEncoder"),
        dict(name="llama_kv", family="decoder LLM (prefill/decode pair)", build=llama_pair,
             source="a Llama-style module written here"),
    ] + wide


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: export_corpus.py OUT_DIR [NAME...]")
    out_root, only = sys.argv[1], set(sys.argv[2:])
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    os.makedirs(out_root, exist_ok=True)
    entries = models()
    unknown = only - {m["name"] for m in entries}
    if unknown:
        sys.exit(f"export_corpus: unknown model(s) {sorted(unknown)}; known: {[m['name'] for m in entries]}")
    failed = []
    for m in entries:
        if only and m["name"] not in only:
            continue
        final = os.path.join(out_root, m["name"])
        try:
            with open(os.path.join(final, "meta.json")) as f:
                if json.load(f).get("script_hash") == SCRIPT_HASH:
                    print(f"export_corpus: {m['name']}: up to date")
                    continue
        except (OSError, ValueError):
            pass
        # Written into a fresh folder, then renamed: an interrupted export leaves no half model behind.
        work = tempfile.mkdtemp(prefix=f".{m['name']}.", dir=out_root)
        start = time.monotonic()
        try:
            meta = m["build"](work)
        except Exception as e:  # an architecture that cannot export is reported; the others still are
            print(f"export_corpus: {m['name']}: export FAILED: {type(e).__name__}: {e}", file=sys.stderr)
            failed.append(m["name"])
            os.system(f"rm -rf '{work}'")
            continue
        took = time.monotonic() - start
        meta.update(name=m["name"], family=m["family"], source=m["source"], script_hash=SCRIPT_HASH,
                    torch=torch.__version__, export_seconds=round(took, 1))
        with open(os.path.join(work, "meta.json"), "w") as f:
            json.dump(meta, f, indent=1)
        if os.path.isdir(final):
            os.system(f"rm -rf '{final}'")
        os.rename(work, final)
        print(f"export_corpus: {m['name']}: exported in {took:.1f} s")
    if failed:
        sys.exit(f"export_corpus: {len(failed)} model(s) failed to export: {' '.join(failed)}")


if __name__ == "__main__":
    main()
