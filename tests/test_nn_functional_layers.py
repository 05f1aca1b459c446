"""tg.nn.functional's layers (convolutions, pooling, normalisations, attention,
resampling, embeddings, patches) against PyTorch, one table of cases.

Each case is a function of the functional namespace (tapegrad's or torch's: the
spellings are the same) and of input tensors drawn from a fixed NumPy generator.  Every
case is checked
* against literal values (``EXPECTED``: the output's shape, first values, sum of squares
  and a weighted sum, as PyTorch 2.13 computes them in float64), without torch;
* against torch itself, values and input gradients, through the compiled reverse and the
  interpreted one (``engine.INTERPRET``), when torch is installed;
* by gradcheck and gradgradcheck (central finite differences).

``python tests/test_nn_functional_layers.py`` (torch installed) prints ``EXPECTED`` again.
"""
import numpy as np
import pytest

import tapegrad as tg
import tapegrad.nn.functional as F

from case_tables import functional_tests, inputs, print_expected, tg_inputs


X4 = ((2, 3, 7, 6), "f")
X3 = ((2, 3, 9), "f")
# name: (function of (F, *tensors), input specs, run gradgradcheck)
CASES = {
    "conv2d": (lambda F, x, w, b: F.conv2d(x, w, b, stride=(2, 1), padding=1), [X4, ((4, 3, 3, 2), "f"), ((4,), "f")],
               True),
    "conv2d_groups_dilation": (lambda F, x, w: F.conv2d(x, w, None, 1, (1, 2), 2, 3), [X4, ((6, 1, 3, 3), "f")],
                               True),
    "conv2d_same": (lambda F, x, w: F.conv2d(x, w, padding="same", dilation=(1, 2)), [X4, ((2, 3, 2, 3), "f")], False),
    "conv1d": (lambda F, x, w, b: F.conv1d(x, w, b, stride=2, padding=1), [X3, ((5, 3, 3), "f"), ((5,), "f")], True),
    "conv1d_unbatched": (lambda F, x, w: F.conv1d(x, w, padding="same"), [((3, 9), "f"), ((5, 3, 4), "f")], False),
    "conv_transpose2d": (lambda F, x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1),
                         [((2, 4, 4, 3), "f"), ((4, 3, 3, 2), "f"), ((3,), "f")], True),
    "conv_transpose2d_groups": (lambda F, x, w: F.conv_transpose2d(x, w, None, 1, 1, 1, 2, 2),
                                [((2, 4, 4, 3), "f"), ((4, 3, 3, 3), "f")], False),
    "conv_transpose1d": (lambda F, x, w, b: F.conv_transpose1d(x, w, b, stride=3, output_padding=2),
                         [((2, 4, 5), "f"), ((4, 2, 3), "f"), ((2,), "f")], True),
    "max_pool2d": (lambda F, x: F.max_pool2d(x, 2), [X4], True),
    "max_pool2d_ceil": (lambda F, x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True), [X4], False),
    "max_pool2d_dilation": (lambda F, x: F.max_pool2d(x, (2, 3), (1, 2), 1, (2, 1)), [X4], False),
    "max_pool1d": (lambda F, x: F.max_pool1d(x, 3, 2, 1), [X3], False),
    "avg_pool2d": (lambda F, x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True), [X4], True),
    "avg_pool2d_exclude_pad": (lambda F, x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False), [X4], False),
    "avg_pool2d_divisor": (lambda F, x: F.avg_pool2d(x, (2, 3), divisor_override=5), [X4], False),
    "avg_pool1d": (lambda F, x: F.avg_pool1d(x, 3, 2, 1), [X3], False),
    "adaptive_avg_pool2d": (lambda F, x: F.adaptive_avg_pool2d(x, (3, 4)), [X4], True),
    "adaptive_avg_pool1d": (lambda F, x: F.adaptive_avg_pool1d(x, 4), [X3], False),
    "adaptive_max_pool2d": (lambda F, x: F.adaptive_max_pool2d(x, (3, 4)), [X4], False),
    "adaptive_max_pool1d": (lambda F, x: F.adaptive_max_pool1d(x, 4), [X3], False),
    "lp_pool2d": (lambda F, x: F.lp_pool2d(x, 2, 2), [((2, 3, 6, 4), "p")], False),
    "layer_norm": (lambda F, x, w, b: F.layer_norm(x, (6,), w, b), [X4, ((6,), "f"), ((6,), "f")], True),
    "layer_norm_2d_no_affine": (lambda F, x: F.layer_norm(x, (7, 6), eps=1e-3), [X4], True),
    "group_norm": (lambda F, x, w, b: F.group_norm(x, 3, w, b), [((2, 6, 4, 3), "f"), ((6,), "f"), ((6,), "f")],
                   True),
    "batch_norm_train": (lambda F, x, w, b: F.batch_norm(x, None, None, w, b, training=True),
                         [X4, ((3,), "f"), ((3,), "f")], True),
    "batch_norm_eval": (lambda F, x, m, v, w, b: F.batch_norm(x, m, v, w, b),
                        [X4, ((3,), "c"), ((3,), "q"), ((3,), "f"), ((3,), "f")], False),
    "instance_norm": (lambda F, x, w, b: F.instance_norm(x, weight=w, bias=b), [X4, ((3,), "f"), ((3,), "f")], True),
    "rms_norm": (lambda F, x, w: F.rms_norm(x, (6,), w), [X4, ((6,), "f")], True),
    "local_response_norm": (lambda F, x: F.local_response_norm(x, 3), [X4], False),
    "sdpa": (lambda F, q, k, v: F.scaled_dot_product_attention(q, k, v),
             [((2, 3, 5, 4), "f"), ((2, 3, 6, 4), "f"), ((2, 3, 6, 3), "f")], True),
    "sdpa_causal": (lambda F, q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3),
                    [((2, 3, 6, 4), "f"), ((2, 3, 6, 4), "f"), ((2, 3, 6, 3), "f")], True),
    "sdpa_float_mask": (lambda F, q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
                        [((2, 3, 5, 4), "f"), ((2, 3, 6, 4), "f"), ((2, 3, 6, 3), "f"), ((5, 6), "f")], True),
    "sdpa_bool_mask": (lambda F, q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
                       [((2, 3, 5, 4), "f"), ((2, 3, 6, 4), "f"), ((2, 3, 6, 3), "f"), ((5, 6), "b")], False),
    "interpolate_nearest": (lambda F, x: F.interpolate(x, size=(9, 5)), [X4], False),
    "interpolate_nearest_scale": (lambda F, x: F.interpolate(x, scale_factor=1.7), [X4], False),
    "interpolate_nearest_exact": (lambda F, x: F.interpolate(x, size=(5, 8), mode="nearest-exact"), [X4], False),
    "interpolate_bilinear": (lambda F, x: F.interpolate(x, size=(9, 5), mode="bilinear"), [X4], True),
    "interpolate_bilinear_corners": (lambda F, x: F.interpolate(x, scale_factor=(2, 1.5), mode="bilinear",
                                                                align_corners=True), [X4], False),
    "interpolate_linear": (lambda F, x: F.interpolate(x, size=13, mode="linear"), [X3], False),
    "interpolate_area": (lambda F, x: F.interpolate(x, size=(3, 4), mode="area"), [X4], False),
    "pixel_shuffle": (lambda F, x: F.pixel_shuffle(x, 2), [((2, 8, 3, 2), "f")], False),
    "pixel_unshuffle": (lambda F, x: F.pixel_unshuffle(x, 2), [((2, 2, 4, 6), "f")], False),
    "unfold": (lambda F, x: F.unfold(x, (2, 3), dilation=(1, 2), padding=1, stride=(2, 1)), [X4], True),
    "fold": (lambda F, x: F.fold(x, (5, 6), (2, 3), padding=1, stride=(2, 1)), [((2, 12, 18), "f")], True),
    "embedding": (lambda F, i, w: F.embedding(i, w), [((3, 4), "i7"), ((7, 5), "f")], False),
    "embedding_padding_idx": (lambda F, i, w: F.embedding(i, w, padding_idx=2), [((3, 4), "i4"), ((4, 5), "f")],
                              False),
    "embedding_scale_grad": (lambda F, i, w: F.embedding(i, w, scale_grad_by_freq=True),
                             [((3, 4), "i4"), ((4, 5), "f")], False),
    "bilinear": (lambda F, a, b, w, c: F.bilinear(a, b, w, c), [((4, 3), "f"), ((4, 5), "f"), ((2, 3, 5), "f"),
                                                                  ((2,), "f")], True),
    "linear": (lambda F, x, w, b: F.linear(x, w, b), [((4, 3), "f"), ((2, 3), "f"), ((2,), "f")], True),
    "normalize": (lambda F, x: F.normalize(x, dim=-1), [X4], True),
    "cosine_similarity": (lambda F, a, b: F.cosine_similarity(a, b), [X4, X4], True),
    "pairwise_distance": (lambda F, a, b: F.pairwise_distance(a, b, 3.0), [((4, 5), "f"), ((4, 5), "f")], True),
}

# PyTorch 2.13's outputs (float64) of the cases on case_tables.inputs(specs): shape, the first values,
# sum of squares, and sum of (output * (k % 7 - 3)) over the flat index k
EXPECTED = {
    'adaptive_avg_pool1d':
        ([2, 3, 4],
         [0.21134933608179116, 0.06988446481173693, 0.37664190895950367, 0.5157819241507956, -0.615789984745387,
          -0.8341654864080454],
         8.057295740453863, -7.682002438784478),
    'adaptive_avg_pool2d':
        ([2, 3, 3, 4],
         [-0.04985267875165155, -0.11883984945189689, -0.5993319211920396, -0.2694303234446999, -0.015366008890314427,
          -0.2000351427133169],
         11.09394901615203, 13.75712741181177),
    'adaptive_max_pool1d':
        ([2, 3, 4],
         [0.6404226504432821, 0.6404226504432821, 1.3040000451301372, 1.3040000451301372, 0.0413259793472436,
          0.0413259793472436],
         26.435001351952643, -8.105865528159747),
    'adaptive_max_pool2d':
        ([2, 3, 3, 4],
         [1.3040000451301372, 0.9470809631292422, 0.10490011715303971, 0.36159505490948474, 1.0425133694426776,
          1.0425133694426776],
         135.6398119519747, 23.372755310908584),
    'avg_pool1d':
        ([2, 3, 5],
         [-0.0021248807326361974, 0.2044059681016733, -0.023058067032862173, 0.8708920210562882, 0.08111524244074986,
          -0.6295653111944682],
         13.541022380795443, 9.114122830820124),
    'avg_pool2d':
        ([2, 3, 4, 4],
         [0.24941181845127453, -0.04542864882430922, -0.21294935059274972, 0.06715350570945472, 0.12904471950053442,
          -0.10428928139605957],
         7.544461039520457, -3.134280412442024),
    'avg_pool2d_divisor':
        ([2, 3, 3, 2],
         [0.436278756139552, -0.3833088310669495, -0.49282482859033383, -0.10800952535476482, -0.22480710765321038,
          -0.009675732444727825],
         9.02789754260172, 5.730545704741883),
    'avg_pool2d_exclude_pad':
        ([2, 3, 4, 3],
         [0.5611765915153677, -0.06814297323646383, -0.3194240258891246, 0.19356707925080163, -0.10428928139605957,
          -0.2652686201122206],
         11.641127553246761, 12.788733984515577),
    'batch_norm_eval':
        ([2, 3, 7, 6],
         [0.14644327078115094, 0.31078266261508575, -0.1816123195693453, 0.15972000005779144, 0.5680073389078253,
          -0.003892683058688237],
         697.4809903132158, -20.90375833584296),
    'batch_norm_train':
        ([2, 3, 7, 6],
         [1.1193863859528594, 0.8159099189983386, 1.7251885032252101, 1.0948689841989452, 0.3409073337768826,
          1.3970034783518313],
         322.0252460895231, -0.1997221941345515),
    'bilinear':
        ([4, 2],
         [-0.7203446120799066, -1.1301522202413514, 0.26636677687002797, -1.2938523908097457, 4.550390730306546,
          0.7019167454744214],
         37.44419808520169, 4.365709499782568),
    'conv1d':
        ([2, 5, 5],
         [1.8339901783021697, 2.1946880032565064, -1.334532318465131, -1.6317797479305636, -2.0753383940691164,
          -0.7531939843126477],
         366.19946037822825, 53.897348959690596),
    'conv1d_unbatched':
        ([5, 9],
         [-1.3649864553355, 0.4194768834087984, -1.0321963009627695, -1.7228710718337623, 0.1849884648039133,
          -1.1191728088526787],
         212.22793082469755, 24.389942140046344),
    'conv2d':
        ([2, 4, 4, 7],
         [0.5192510657937282, -3.679955684563254, -3.9102592560522638, 2.4451202440535806, 2.363042981497665,
          -1.9400541916074472],
         3295.998315541042, -76.12709331213887),
    'conv2d_groups_dilation':
        ([2, 6, 5, 6],
         [0.07056775929156876, 0.6444288957247151, 1.3050226605431907, 3.7511527696068865, -1.6375953209761356,
          -1.417296096971933],
         2767.5015893646923, 62.58716777150234),
    'conv2d_same':
        ([2, 2, 7, 6],
         [-0.22967256240908984, -1.4902497636355885, -0.7529841783159242, -0.7332926312761135, 3.1797888113216723,
          3.3437271738711596],
         2960.0845321144625, 327.6371333116433),
    'conv_transpose1d':
        ([2, 2, 17],
         [1.5677471894609973, 1.303514443648736, 2.272239186549853, 3.040840115343478, 3.072416907703306,
          2.6847958966583234],
         205.5055512944104, -14.061750691737725),
    'conv_transpose2d':
        ([2, 3, 8, 5],
         [1.058065949921681, 1.6224340574010567, 1.837752817664474, -1.6377501580215736, -1.3297969929296305,
          0.4733819048045458],
         1197.209583292186, 41.047081146286274),
    'conv_transpose2d_groups':
        ([2, 6, 7, 6],
         [0.6902865858750342, 0.5469761348275586, 0.387149366971919, 0.2537868037817974, 1.1372655788671564,
          -0.2415808151409909],
         1637.9091467912265, 112.70009880958982),
    'cosine_similarity':
        ([2, 7, 6],
         [-0.5729086943222645, -0.07462342487663343, 0.8523204395546203, -0.8577082107795806, -0.22853186850669466,
          0.9080308691264896],
         28.757304905407842, -0.30708082250365853),
    'embedding':
        ([3, 4, 5],
         [-0.20917557487171307, -0.15922500991447772, 0.5408455846858077, 0.2146591225063409, 0.3553727090399214,
          -0.7434992493538084],
         46.56414774218271, -14.641112391442768),
    'embedding_padding_idx':
        ([3, 4, 5],
         [1.3664634705496859, -0.6651946734866135, 0.3515100700930197, 0.9034701816518086, 0.09401229776087457,
          -0.5442589828573099],
         50.19951080082707, 17.934479942146286),
    'embedding_scale_grad':
        ([3, 4, 5],
         [1.3664634705496859, -0.6651946734866135, 0.3515100700930197, 0.9034701816518086, 0.09401229776087457,
          -0.5442589828573099],
         50.19951080082707, 17.934479942146286),
    'fold':
        ([2, 2, 5, 6],
         [1.3990836360241778, -0.4754310576940371, 4.092462366135779, -2.9373347839530792, -2.058713886196529,
          1.1848353596726888],
         339.21527684863497, 16.10369582648576),
    'group_norm':
        ([2, 6, 4, 3],
         [-0.1984934883595662, -0.2955280600879469, -0.004792310829783675, -0.20633276368446393, -0.4474069615704298,
          -0.10972727878902463],
         153.824227864656, -26.738677813278777),
    'instance_norm':
        ([2, 3, 7, 6],
         [1.0813842400515572, 0.7487603468024739, 1.745370679619092, 1.0545120621012287, 0.22813609285194367,
          1.3856650926425915],
         322.02515238487035, 2.1543240554007603),
    'interpolate_area':
        ([2, 3, 3, 4],
         [-0.04985267875165155, -0.11883984945189689, -0.5993319211920396, -0.2694303234446999, -0.015366008890314427,
          -0.2000351427133169],
         11.09394901615203, 13.75712741181177),
    'interpolate_bilinear':
        ([2, 3, 9, 5],
         [0.09994671265492379, 0.09965339082907315, 0.3726613837981609, -0.3434985260668656, 0.2718686121024247,
          0.8788543288383398],
         126.93338674093354, -4.625803047556136),
    'interpolate_bilinear_corners':
        ([2, 3, 14, 9],
         [0.1257302210933933, -0.03541670664704119, 0.0610270151423441, 0.5438567112264591, 0.3726613837981609,
          0.024828930863770873],
         385.91726637280306, -12.941776120648155),
    'interpolate_linear':
        ([2, 3, 13],
         [0.1257302210933933, -0.01310405511375026, 0.04617071680129446, 0.5809974570790831, 0.3108703222646714,
          -0.09219818755900654],
         49.71164130853579, -6.691694813849285),
    'interpolate_nearest':
        ([2, 3, 9, 5],
         [0.1257302210933933, -0.1321048632913019, 0.6404226504432821, 0.10490011715303971, -0.535669373161111,
          0.1257302210933933],
         276.1406097114535, -14.066484676589628),
    'interpolate_nearest_exact':
        ([2, 3, 5, 8],
         [0.1257302210933933, -0.1321048632913019, -0.1321048632913019, 0.6404226504432821, 0.10490011715303971,
          -0.535669373161111],
         242.10223436614754, 23.018539716303813),
    'interpolate_nearest_scale':
        ([2, 3, 11, 10],
         [0.1257302210933933, 0.1257302210933933, -0.1321048632913019, -0.1321048632913019, 0.6404226504432821,
          0.6404226504432821],
         678.9579192624078, -34.509546200669675),
    'layer_norm':
        ([2, 3, 7, 6],
         [-0.7395919576171623, 2.9102089805734903, 0.4857201899176073, -0.42825167736742703, 0.07238095601768846,
          -0.22794817988488064],
         450.6939231088267, 3.613852818498952),
    'layer_norm_2d_no_affine':
        ([2, 3, 7, 6],
         [0.21425962466480528, -0.09744956539340764, 0.8364959687395956, 0.18907711374480796, -0.5853380418897618,
          0.4994079259034903],
         251.73545259656987, -16.870992968048625),
    'linear':
        ([4, 2],
         [-0.649702245173174, 0.8197787070842077, -0.16558070818258053, 1.1428687339212351, -1.9506316842261007,
          -0.20522905068595687],
         23.36749771134104, 1.5441252005149124),
    'local_response_norm':
        ([2, 3, 7, 6],
         [0.12572447807833337, -0.13210278961582994, 0.6404149642310517, 0.10489982985464959, -0.5356370643136035,
          0.3615591403554028],
         258.67318496243666, -20.311682489913203),
    'lp_pool2d':
        ([2, 3, 3, 2],
         [3.0640647796723446, 2.262792449676273, 2.9737834270486827, 2.5200846774630272, 2.389247607301828,
          2.572694399454159],
         274.04042364803615, -10.84182732254326),
    'max_pool1d':
        ([2, 3, 5],
         [0.1257302210933933, 0.6404226504432821, 0.36159505490948474, 1.3040000451301372, 0.9470809631292422,
          -0.6232744625373522],
         27.55144126082963, 7.328128827801537),
    'max_pool2d':
        ([2, 3, 3, 3],
         [1.3040000451301372, 0.6404226504432821, 0.36159505490948474, 1.0425133694426776, 1.3664634705496859,
          0.3515100700930197],
         81.75860379474457, -5.765244749505113),
    'max_pool2d_ceil':
        ([2, 3, 4, 4],
         [1.3040000451301372, 0.9470809631292422, 0.36159505490948474, 0.36159505490948474, 1.3040000451301372,
          1.3664634705496859],
         198.90519529806016, -3.683322519472327),
    'max_pool2d_dilation':
        ([2, 3, 7, 3],
         [1.3040000451301372, 0.9470809631292422, 0.0413259793472436, 0.1257302210933933, 0.6404226504432821,
          0.36159505490948474],
         221.22693954604404, -35.50321526355394),
    'normalize':
        ([2, 3, 7, 6],
         [0.1346347353758899, -0.1414608449457911, 0.6857789107609233, 0.11232939376849213, -0.5736067564133525,
          0.387204079557027],
         42.0, -11.11792435707884),
    'pairwise_distance':
        ([4], [2.0490387396915337, 2.641122716592891, 2.39783782520258, 1.128657060323196], 18.19758195664932,
         -13.827199477462962),
    'pixel_shuffle':
        ([2, 2, 6, 4],
         [0.1257302210933933, 1.3040000451301372, -0.1321048632913019, 0.9470809631292422, -2.3250307746388343,
          0.4116305363741328],
         89.09527247007735, -1.7522636209854978),
    'pixel_unshuffle':
        ([2, 8, 2, 3],
         [0.1257302210933933, 0.6404226504432821, -0.535669373161111, -2.3250307746388343, -1.2459109472530652,
          -0.5442589828573099],
         89.09527247007736, 20.1881930512146),
    'rms_norm':
        ([2, 3, 7, 6],
         [0.35165933916644504, 0.31935250369825163, 1.3517702673386478, 0.23463348401969086, 0.9381299340901755,
          0.15482917248038416],
         168.0829806949493, 3.2747523192373578),
    'sdpa':
        ([2, 3, 5, 3],
         [0.4521444080759287, -0.05324517387656311, -0.5637461262336225, 0.21344402987439384, -0.19223852621159557,
          -0.4059771700424758],
         19.735384567344664, 5.301479027348994),
    'sdpa_bool_mask':
        ([2, 3, 5, 3],
         [1.5465229225606971, 0.383589206451175, -0.6943882844584186, 0.21344402987439384, -0.19223852621159557,
          -0.4059771700424758],
         31.72116290021913, 2.6783144402528074),
    'sdpa_causal':
        ([2, 3, 6, 3],
         [-0.6402624053903738, 0.7323017147112972, -1.170530808407683, -1.2241872725609226, 0.664313870847242,
          0.24504833064918052],
         37.19720798223419, 3.0130183577898784),
    'sdpa_float_mask':
        ([2, 3, 5, 3],
         [0.31524902454041415, -0.26460219216685, -0.6793719114510289, 0.48637596745729633, -0.20459615816856067,
          -0.5535795437362726],
         27.608405799634692, 1.4198158934870695),
    'unfold':
        ([2, 18, 16], [0.0, 0.0, 0.0, 0.0, 0.0, 1.3040000451301372], 433.90712147716863, 25.742999047650564),
}


# (not by finite differences: the gradient PyTorch defines is not the derivative here: no
# gradient reaches padding_idx's row)
test_values_are_pytorchs, test_values_and_gradients_match_torch, test_gradcheck = functional_tests(
    CASES, EXPECTED, not_finite_differences={"embedding_padding_idx", "embedding_scale_grad"})


if __name__ == "__main__":
    print_expected(CASES)


def opcode_programs():
    """Calls that record every opcode of tg.nn's entries (tests/test_op_records.py checks each
    opcode is exercised): the cases here and in tests/test_nn_activations_losses.py, the
    entries a create_graph reverse records (conv's transpose and weight adjoint, avg_pool's
    adjoint), the recurrent steps and the CTC loss."""
    import test_nn_activations_losses as acts
    for table, make, wrap in ((CASES, inputs, tg_inputs), (acts.CASES, inputs, tg_inputs)):
        for fn, specs, _ in table.values():
            arrays = make(specs)
            yield lambda fn=fn, arrays=arrays, specs=specs, wrap=wrap: fn(F, *wrap(arrays, specs))

    def create_graph():
        x, w = tg.randn(1, 2, 5, 5, requires_grad=True), tg.randn(3, 2, 3, 3, requires_grad=True)
        tg.autograd.grad(F.conv2d(x, w).pow(2).sum(), (x, w), create_graph=True)
        tg.autograd.grad(F.avg_pool2d(x, 2).pow(2).sum(), x, create_graph=True)
    yield create_graph

    def recurrent():
        tg.manual_seed(0)
        x = tg.randn(3, 2, 4, requires_grad=True)
        tg.nn.LSTM(4, 3)(x)
        tg.nn.LSTMCell(4, 3)(x[0])
        tg.nn.GRUCell(4, 3)(x[0])
    yield recurrent

    def ctc():
        lp = F.log_softmax(tg.randn(5, 2, 4, requires_grad=True), 2)
        F.ctc_loss(lp, tg.tensor([[1, 2], [3, 0]]), tg.tensor([5, 4]), tg.tensor([2, 1]))
    yield ctc


@pytest.mark.parametrize("has_w,has_b", [(True, True), (True, False), (False, True), (False, False)])
def test_layer_norm_row_kernels_match_the_numpy_path(has_w, has_b, monkeypatch):
    """layer_norm over the last axis of float64 arrays runs in two compiled row kernels
    once the kernels are loaded; the NumPy path (other dtypes, several trailing axes,
    before the kernels are loaded) gives the same values and gradients, and so does
    PyTorch."""
    from tapegrad import _jit
    from tapegrad.nn import _norm
    _jit.load()
    rng = np.random.default_rng(3)
    xs, gy = rng.standard_normal((4, 5, 24)) * 2 + 0.5, rng.standard_normal((4, 5, 24))
    ws, bs = rng.standard_normal(24), rng.standard_normal(24)

    def run(lib):
        x = lib.tensor(xs, requires_grad=True)
        w = lib.tensor(ws, requires_grad=True) if has_w else None
        b = lib.tensor(bs, requires_grad=True) if has_b else None
        y = lib.nn.functional.layer_norm(x, (24,), w, b, 1e-3)
        (y * lib.tensor(gy)).sum().backward()
        return [y.detach().numpy(), x.grad.numpy()] + [t.grad.numpy() for t in (w, b) if t is not None]
    monkeypatch.setattr(_jit, "READY", [True])
    kernels = run(tg)
    assert _norm._ln_rows.signatures and _norm._ln_rows_rev.signatures      # (the row kernels ran)
    monkeypatch.setattr(_jit, "READY", [False])
    numpy_path = run(tg)
    for a, b in zip(kernels, numpy_path):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-14)
    monkeypatch.setattr(_jit, "READY", [True])
    params = [tg.tensor(a, requires_grad=True) for a, on in ((ws[:5], has_w), (bs[:5], has_b)) if on]

    def f(x, *p):
        it = iter(p)
        return F.layer_norm(x, (5,), next(it) if has_w else None, next(it) if has_b else None)
    assert tg.autograd.gradcheck(f, [tg.tensor(xs[:2, :3, :5], requires_grad=True)] + params)
    try:
        import torch
    except ImportError:
        return
    for a, b in zip(kernels, run(torch)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("args", [(2,), (3, 2, 1, 1, True), ((2, 3), (1, 2), 1, (2, 1)), (3, 1, 1)],
                         ids=["2x2", "ceil_pad", "dilation", "stride1_pad"])
def test_max_pool_reverse_kernel_matches_the_scan(monkeypatch, args):
    """max_pool's reverse by its compiled kernel (once the kernels are loaded) and by the
    NumPy scan: the same gradient, ties to the window's first maximum, NaN taking over."""
    from tapegrad import _jit
    _jit.load()
    rng = np.random.default_rng(4)
    v = rng.integers(-3, 4, (2, 3, 9, 10)).astype(np.float64)     # (ties)
    v[0, 0, 2, 3] = np.nan
    v[1, 2, 4, 4] = -np.inf
    gy = None
    grads = []
    for ready in (False, True):
        monkeypatch.setattr(_jit, "READY", [ready])
        x = tg.tensor(v, requires_grad=True)
        y = F.max_pool2d(x, *args)
        if gy is None:
            gy = rng.standard_normal(tuple(y.shape))
        (y * tg.tensor(gy)).sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_array_equal(grads[1], grads[0])
    assert np.isfinite(grads[1]).all() and grads[1].sum() == pytest.approx(gy.sum(), rel=1e-12)
    torch = pytest.importorskip("torch")
    xt = torch.tensor(v, requires_grad=True)
    torch.nn.functional.max_pool2d(xt, *args).backward(torch.tensor(gy))
    np.testing.assert_array_equal(grads[1], xt.grad.numpy())
