"""SG-Net's syntax-guided layer on top of the encoder."""
import torch

from spacy_sla.layers import SyntaxAwareTransformer

from util import batch_inputs, random_local_mask, tiny_encoder, vanilla_output


def test_the_syntax_guided_layer_mixes_with_the_encoder_output():
    input_ids, attention_mask = batch_inputs()
    sgnet = SyntaxAwareTransformer(tiny_encoder("bert"), sla_layers=[], ancestor_mask_layer=True).eval()
    assert sgnet.sla_modules() == [] and sgnet.sla_parameter_names()[0].startswith("guided_layer.")
    guide = random_local_mask()
    with torch.no_grad():
        mixed = sgnet(input_ids, attention_mask, guide_mask=guide).last_hidden_state
        encoder = vanilla_output(sgnet.transformer, input_ids, attention_mask)
        visible = (guide | ~attention_mask.bool()[:, :, None])[:, None] & attention_mask.bool()[:, None, None, :]
        additive = torch.zeros(visible.shape).masked_fill(~visible, torch.finfo(torch.float32).min)
        guided = sgnet.guided_layer.layer(encoder, attention_mask=additive)[0]
        assert torch.allclose(mixed, 0.5 * encoder + 0.5 * guided, atol=1e-5)
        unguided = sgnet(input_ids, attention_mask).last_hidden_state
        assert (unguided - mixed).abs().max() > 1e-4
        sgnet.guided_layer.mix_logits.copy_(torch.tensor([50.0, -50.0]))
        only_encoder = sgnet(input_ids, attention_mask, guide_mask=guide).last_hidden_state
    assert torch.allclose(only_encoder, encoder, atol=1e-5)
