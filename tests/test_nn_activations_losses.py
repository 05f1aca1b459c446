"""tg.nn.functional's activations and losses against PyTorch, one table of cases
(the same checks as tests/test_nn_functional_layers.py: literal values without torch,
torch's values and input gradients through both reverses, gradcheck and gradgradcheck).
Inputs avoid the kinks, where finite differences are not the derivative; the kinks
themselves are checked against torch in ``test_gradients_at_the_kinks``.

``python tests/test_nn_activations_losses.py`` (torch installed) prints ``EXPECTED`` again.
"""
import numpy as np
import pytest

import tapegrad as tg
import tapegrad.nn.functional as F
from tapegrad import nn

from case_tables import functional_tests, print_expected


X = ((3, 4), "f")
P = ((3, 4), "p")
T = ((3, 4), "c")          # a target: not differentiated
ACT = [
    ("gelu", lambda F, x: F.gelu(x)), ("gelu_tanh", lambda F, x: F.gelu(x, approximate="tanh")),
    ("silu", lambda F, x: F.silu(x)), ("mish", lambda F, x: F.mish(x)), ("elu", lambda F, x: F.elu(x, 0.7)),
    ("celu", lambda F, x: F.celu(x, 1.3)), ("selu", lambda F, x: F.selu(x)),
    ("leaky_relu", lambda F, x: F.leaky_relu(x, 0.2)), ("relu6", lambda F, x: F.relu6(x * 4)),
    ("hardtanh", lambda F, x: F.hardtanh(x, -0.5, 0.8)), ("hardswish", lambda F, x: F.hardswish(x * 3)),
    ("hardsigmoid", lambda F, x: F.hardsigmoid(x * 3)), ("softsign", lambda F, x: F.softsign(x)),
    ("tanhshrink", lambda F, x: F.tanhshrink(x)), ("logsigmoid", lambda F, x: F.logsigmoid(x * 10)),
    ("softmin", lambda F, x: F.softmin(x, dim=1)), ("glu", lambda F, x: F.glu(x, 1)),
    ("hardshrink", lambda F, x: F.hardshrink(x, 0.3)), ("softshrink", lambda F, x: F.softshrink(x, 0.3)),
    ("threshold", lambda F, x: F.threshold(x, 0.1, -2.0)), ("softplus", lambda F, x: F.softplus(x, 2.0, 3.0)),
    ("relu", lambda F, x: F.relu(x)), ("rrelu_eval", lambda F, x: F.rrelu(x, 0.1, 0.3)),
]
# name: (function of (F, *tensors), input specs, run gradgradcheck)
CASES = {name: (fn, [X], True) for name, fn in ACT}
CASES.update({
    "prelu": (lambda F, x, w: F.prelu(x, w), [((2, 3, 4), "f"), ((3,), "f")], True),
    "prelu_one": (lambda F, x, w: F.prelu(x, w), [((2, 3, 4), "f"), ((1,), "f")], True),
    "smooth_l1_loss": (lambda F, x, y: F.smooth_l1_loss(x, y, beta=0.5), [X, T], True),
    "smooth_l1_loss_sum": (lambda F, x, y: F.smooth_l1_loss(x, y, reduction="sum"), [X, T], True),
    "huber_loss": (lambda F, x, y: F.huber_loss(x, y, delta=0.7), [X, T], True),
    "huber_loss_none": (lambda F, x, y: F.huber_loss(x, y, reduction="none"), [X, T], True),
    "kl_div": (lambda F, x, y: F.kl_div(F.log_softmax(x, 1), y, reduction="batchmean"), [X, ((3, 4), "q")], True),
    "kl_div_log_target": (lambda F, x, y: F.kl_div(x, y, reduction="sum", log_target=True), [X, T], True),
    "poisson_nll_loss": (lambda F, x, y: F.poisson_nll_loss(x, y), [X, ((3, 4), "q")], True),
    "poisson_nll_loss_full": (lambda F, x, y: F.poisson_nll_loss(x, y, log_input=False, full=True),
                              [P, ((3, 4), "j5")], True),
    "gaussian_nll_loss": (lambda F, x, y, v: F.gaussian_nll_loss(x, y, v), [X, T, P], True),
    "gaussian_nll_loss_full": (lambda F, x, y, v: F.gaussian_nll_loss(x, y, v, full=True, reduction="sum"),
                               [X, T, ((3,), "p")], True),
    "cosine_embedding_loss": (lambda F, a, b, y: F.cosine_embedding_loss(a, b, y, margin=0.2),
                              [X, X, ((3,), "s")], True),
    "margin_ranking_loss": (lambda F, a, b, y: F.margin_ranking_loss(a, b, y, margin=0.1),
                            [((5,), "f"), ((5,), "f"), ((5,), "s")], True),
    "hinge_embedding_loss": (lambda F, x, y: F.hinge_embedding_loss(x, y, margin=0.5), [X, ((3, 4), "s")], True),
    "multilabel_soft_margin_loss": (lambda F, x, y: F.multilabel_soft_margin_loss(x, y), [X, ((3, 4), "j2")], True),
    "soft_margin_loss": (lambda F, x, y: F.soft_margin_loss(x, y), [X, ((3, 4), "s")], True),
    "triplet_margin_loss": (lambda F, a, p, n: F.triplet_margin_loss(a, p, n), [X, X, X], True),
    "triplet_margin_loss_swap": (lambda F, a, p, n: F.triplet_margin_loss(a, p, n, margin=0.5, p=1, swap=True),
                                 [X, X, X], False),
    "multi_margin_loss": (lambda F, x, y: F.multi_margin_loss(x, y), [X, ((3,), "i4")], False),
    "multi_margin_loss_p2": (lambda F, x, y, w: F.multi_margin_loss(x, y, p=2, margin=0.7, weight=w),
                             [X, ((3,), "i4"), ((4,), "q")], False),
    "cross_entropy_smoothing": (lambda F, x, y: F.cross_entropy(x, y, label_smoothing=0.2), [X, ((3,), "i4")], True),
    "cross_entropy_weight_ignore": (lambda F, x, y, w: F.cross_entropy(x, y, w, ignore_index=1, label_smoothing=0.1),
                                    [X, ((3,), "i4"), ((4,), "q")], True),
    "nll_loss_weight": (lambda F, x, y, w: F.nll_loss(F.log_softmax(x, 1), y, w), [X, ((3,), "i4"), ((4,), "q")],
                        True),
    "mse_loss": (lambda F, x, y: F.mse_loss(x, y), [X, T], True),
    "l1_loss": (lambda F, x, y: F.l1_loss(x, y, reduction="sum"), [X, T], True),
    "binary_cross_entropy_with_logits": (lambda F, x, y, w: F.binary_cross_entropy_with_logits(x, y, pos_weight=w),
                                         [X, ((3, 4), "j2"), ((4,), "q")], True),
})


# PyTorch 2.13's outputs (float64) of the cases on case_tables.inputs(specs): shape, the first values,
# sum of squares, and sum of (output * (k % 7 - 3)) over the flat index k
EXPECTED = {
    'binary_cross_entropy_with_logits':
        ([], [0.7132221619097879], 0.5086858522392718, -2.139666485729364),
    'celu':
        ([3, 4],
         [0.1257302210933933, -0.1256143745907128, 0.6404226504432821, 0.10490011715303971, -0.4390243874350018,
          0.36159505490948474],
         4.570055906351888, 2.525605297178816),
    'cosine_embedding_loss':
        ([], [1.222343297238248], 1.4941231363032719, -3.667029891714744),
    'cross_entropy_smoothing':
        ([], [1.4724340326238599], 2.168061980428962, -4.41730209787158),
    'cross_entropy_weight_ignore':
        ([], [1.3448578673381584], 1.8086426833413396, -4.034573602014476),
    'elu':
        ([3, 4],
         [0.1257302210933933, -0.08662562727250835, 0.6404226504432821, 0.10490011715303971, -0.29030582698667906,
          0.36159505490948474],
         3.741598657946309, 1.9104937325140356),
    'gaussian_nll_loss':
        ([], [0.6497795577093258], 0.42221347361692707, -1.9493386731279774),
    'gaussian_nll_loss_full':
        ([], [19.30086853042996], 372.52352602894155, -57.90260559128988),
    'gelu':
        ([3, 4],
         [0.06915504908785416, -0.05911041020281814, 0.4733050446994168, 0.05683199525819194, -0.1586082393819444,
          0.23184486671030866],
         2.3926375212515523, 1.4158253169833461),
    'gelu_tanh':
        ([3, 4],
         [0.06915496774512321, -0.059110509226494426, 0.4732638767062631, 0.05683195571121114, -0.15863032095976728,
          0.23183973399484994],
         2.3919395039929108, 1.4158829506116095),
    'glu':
        ([3, 2],
         [0.08233430893250215, -0.06951371213236843, -0.42130793363941815, 0.26053927400028254, -0.24562970084075864,
          -0.6457825705906504],
         0.734361261259714, -1.2238624109154108),
    'hardshrink':
        ([3, 4], [0.0, 0.0, 0.6404226504432821, 0.0, -0.535669373161111, 0.36159505490948474], 5.910218137851726,
         3.2907472748772992),
    'hardsigmoid':
        ([3, 4],
         [0.5628651105466966, 0.43394756835434906, 0.8202113252216411, 0.5524500585765199, 0.2321653134194445,
          0.6807975274547423],
         4.276756069468741, -1.4791646444547486),
    'hardswish':
        ([3, 4],
         [0.2123074643843803, -0.17197975257913248, 1.5758457324661206, 0.17385622759764174, -0.3730915437274401,
          0.7385190579667169],
         26.45365568486015, 3.3629700305328702),
    'hardtanh':
        ([3, 4],
         [0.1257302210933933, -0.1321048632913019, 0.6404226504432821, 0.10490011715303971, -0.5,
          0.36159505490948474],
         2.8668638094849292, 1.0111125020253549),
    'hinge_embedding_loss':
        ([], [0.3338742935905206], 0.11147204392056916, -1.001622880771562),
    'huber_loss':
        ([], [0.4430411641500272], 0.19628547313141134, -1.3291234924500817),
    'huber_loss_none':
        ([3, 4],
         [1.9507609957322276, 0.003757300702707377, 1.3863335976963471, 0.3504246879672946, 3.689069736651734e-05,
          0.2297709587372555],
         10.63616387336714, -8.0203619396943),
    'kl_div':
        ([], [8.179236743161646], 66.89991370068552, -24.537710229484937),
    'kl_div_log_target':
        ([], [8.416243259632433], 70.83315060530835, -25.2487297788973),
    'l1_loss':
        ([], [10.494425418124322], 110.13296485657386, -31.483276254372967),
    'leaky_relu':
        ([3, 4],
         [0.1257302210933933, -0.026420972658260378, 0.6404226504432821, 0.10490011715303971, -0.1071338746322222,
          0.36159505490948474],
         3.2783665513769256, 1.2979464806617427),
    'logsigmoid':
        ([3, 4],
         [-0.2503074868970522, -1.5575863382447555, -0.0016531822544665134, -0.300317496832622, -5.3613991181828276,
          -0.026536133251485683],
         280.119488147696, 24.676465329086746),
    'margin_ranking_loss':
        ([], [0.33023169989241674], 0.1090529756138352, -0.9906950996772502),
    'mish':
        ([3, 4],
         [0.08045347772384674, -0.07365540171113238, 0.5040790588661583, 0.06643734400299689, -0.23071437515018403,
          0.2572722252994334],
         2.6938965461739306, 1.6976793465373254),
    'mse_loss':
        ([], [1.574461648300001], 2.4789294819675556, -4.723384944900003),
    'multi_margin_loss':
        ([], [0.7483994510375845], 0.5601017383133579, -2.2451983531127535),
    'multi_margin_loss_p2':
        ([], [0.7121905534688343], 0.5072153844502445, -2.136571660406503),
    'multilabel_soft_margin_loss':
        ([], [0.7289678217381713], 0.5313940851296943, -2.186903465214514),
    'nll_loss_weight':
        ([], [1.4261939860641712], 2.0340292858856093, -4.278581958192514),
    'poisson_nll_loss':
        ([], [1.2255159975971632], 1.5018894603665702, -3.6765479927914897),
    'poisson_nll_loss_full':
        ([], [2.074041020668392], 4.3016461554151855, -6.222123062005176),
    'prelu':
        ([2, 3, 4],
         [0.1257302210933933, -0.11935280483487985, 0.6404226504432821, 0.10490011715303971, -0.0503595086110034,
          0.36159505490948474],
         14.217893765066128, -3.6809239802087155),
    'prelu_one':
        ([2, 3, 4],
         [0.1257302210933933, -0.11935280483487985, 0.6404226504432821, 0.10490011715303971, -0.4839613058751794,
          0.36159505490948474],
         15.54517785864914, 2.2842328727418435),
    'relu':
        ([3, 4], [0.1257302210933933, 0.0, 0.6404226504432821, 0.10490011715303971, 0.0, 0.36159505490948474],
         3.1667905830009286, 0.8176600214454364),
    'relu6':
        ([3, 4], [0.5029208843735732, 0.0, 2.5616906017731282, 0.41960046861215883, 0.0, 1.446380219637939],
         50.66864932801486, 3.2706400857817455),
    'rrelu_eval':
        ([3, 4],
         [0.1257302210933933, -0.026420972658260378, 0.6404226504432821, 0.10490011715303971, -0.1071338746322222,
          0.36159505490948474],
         3.2783665513769256, 1.2979464806617427),
    'selu':
        ([3, 4],
         [0.1321048674432512, -0.21756636886898206, 0.6728927111455701, 0.11021865666640439, -0.7291235472420472,
          0.37992828121625477],
         7.121931390282382, 3.6038450876902473),
    'silu':
        ([3, 4],
         [0.06681193472792146, -0.06169584190018757, 0.4193801290606316, 0.05519854731122718, -0.19776675969188034,
          0.21313370653381383],
         1.9688261370722226, 1.5270859925287232),
    'smooth_l1_loss':
        ([], [0.6930232917492618], 0.48028128290698247, -2.0790698752477854),
    'smooth_l1_loss_sum':
        ([], [6.670098301924885], 44.49021135734124, -20.010294905774657),
    'soft_margin_loss':
        ([], [0.7626359844245664], 0.5816136447392274, -2.2879079532736992),
    'softmin':
        ([3, 4],
         [0.2555676472009455, 0.33073657843251664, 0.15274879498967275, 0.26094697937686523, 0.5575485474632136,
          0.22730327797725824],
         0.9515112412873038, -1.4726549481699416),
    'softplus':
        ([3, 4],
         [0.4133803543149383, 0.28487145103740674, 0.762993504203626, 0.40176962689135076, 0.14728525502274661,
          0.5593704286592468],
         4.323782405450684, -0.22924825409845678),
    'softshrink':
        ([3, 4], [0.0, 0.0, 0.34042265044328207, 0.0, -0.23566937316111097, 0.06159505490948475], 2.801498584153533,
         2.390747274877299),
    'softsign':
        ([3, 4],
         [0.11168770166912168, -0.11668959967828525, 0.390401004442498, 0.09494081458089844, -0.34881816523986414,
          0.2655672504139071],
         1.568265156384321, 1.3532917345771518),
    'tanhshrink':
        ([3, 4],
         [0.0006583555300561372, -0.0007631576743042656, 0.07523538848187228, 0.00038308871853356963,
          -0.04596652319686578, 0.01497682730092803],
         0.4309767593231238, 1.2130851331983927),
    'threshold':
        ([3, 4], [0.1257302210933933, -2.0, 0.6404226504432821, 0.10490011715303971, -2.0, 0.36159505490948474],
         27.16508274643192, 6.776334042098192),
    'triplet_margin_loss':
        ([], [1.308411885994972], 1.7119416634129196, -3.925235657984916),
    'triplet_margin_loss_swap':
        ([], [1.5552371664955753], 2.4187626440491856, -4.665711499486726),
}

test_values_are_pytorchs, test_values_and_gradients_match_torch, test_gradcheck = functional_tests(
    CASES, EXPECTED, not_finite_differences=())


# -- at the kinks: PyTorch's gradient is a convention (relu's 0, leaky_relu's slope, hardtanh's 0 at
# its bounds, hardswish's at +-3, ...), checked against torch and against literal values
KINK_POINTS = [-3.0, -1.0, -0.5, 0.0, 0.3, 0.5, 0.8, 1.0, 3.0, 6.0]
KINK_FNS = [
    ("relu", lambda F, x: F.relu(x)), ("leaky_relu", lambda F, x: F.leaky_relu(x, 0.2)),
    ("relu6", lambda F, x: F.relu6(x)), ("hardtanh", lambda F, x: F.hardtanh(x, -0.5, 0.8)),
    ("hardswish", lambda F, x: F.hardswish(x)), ("hardsigmoid", lambda F, x: F.hardsigmoid(x)),
    ("elu", lambda F, x: F.elu(x)), ("celu", lambda F, x: F.celu(x, 2.0)), ("selu", lambda F, x: F.selu(x)),
    ("hardshrink", lambda F, x: F.hardshrink(x, 0.5)), ("softshrink", lambda F, x: F.softshrink(x, 0.5)),
    ("threshold", lambda F, x: F.threshold(x, 0.3, 7.0)), ("softsign", lambda F, x: F.softsign(x)),
    ("smooth_l1", lambda F, x: F.smooth_l1_loss(x, x.detach() * 0, reduction="none", beta=1.0)),
    ("huber", lambda F, x: F.huber_loss(x, x.detach() * 0, reduction="none", delta=0.5)),
]
# PyTorch 2.13's values and gradients (summed output) at KINK_POINTS
KINKS = {'celu': ([-1.5537396797031404, -0.7869386805747332, -0.44239843385719024, 0.0, 0.3, 0.5, 0.8, 1.0, 3.0, 6.0],
          [0.22313016014842982, 0.6065306597126334, 0.7788007830714049, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]),
 'elu': ([-0.950212931632136, -0.6321205588285577, -0.3934693402873666, 0.0, 0.3, 0.5, 0.8, 1.0, 3.0, 6.0],
         [0.049787068367863944, 0.36787944117144233, 0.6065306597126334, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]),
 'hardshrink': ([-3.0, -1.0, 0.0, 0.0, 0.0, 0.0, 0.8, 1.0, 3.0, 6.0],
                [1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0]),
 'hardsigmoid': ([0.0, 0.3333333333333333, 0.4166666666666667, 0.5, 0.5499999999999999, 0.5833333333333334,
                  0.6333333333333333, 0.6666666666666666, 1.0, 1.0],
                 [0.0, 0.1666666716337204, 0.1666666716337204, 0.1666666716337204, 0.1666666716337204,
                  0.1666666716337204, 0.1666666716337204, 0.1666666716337204, 0.0, 0.0]),
 'hardswish': ([-0.0, -0.3333333333333333, -0.20833333333333334, 0.0, 0.16499999999999998, 0.2916666666666667,
                0.5066666666666667, 0.6666666666666666, 3.0, 6.0],
               [0.0, 0.16666666666666669, 0.33333333333333337, 0.5, 0.6, 0.6666666666666666, 0.7666666666666666,
                0.8333333333333333, 1.0, 1.0]),
 'hardtanh': ([-0.5, -0.5, -0.5, 0.0, 0.3, 0.5, 0.8, 0.8, 0.8, 0.8],
              [0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0]),
 'huber': ([1.375, 0.375, 0.125, 0.0, 0.045, 0.125, 0.275, 0.375, 1.375, 2.875],
           [-0.5, -0.5, -0.5, 0.0, 0.3, 0.5, 0.5, 0.5, 0.5, 0.5]),
 'leaky_relu': ([-0.6000000000000001, -0.2, -0.1, 0.0, 0.3, 0.5, 0.8, 1.0, 3.0, 6.0],
                [0.2, 0.2, 0.2, 0.2, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]),
 'relu': ([0.0, 0.0, 0.0, 0.0, 0.3, 0.5, 0.8, 1.0, 3.0, 6.0], [0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]),
 'relu6': ([0.0, 0.0, 0.0, 0.0, 0.3, 0.5, 0.8, 1.0, 3.0, 6.0], [0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0]),
 'selu': ([-1.6705687287671118, -1.1113307378125625, -0.6917581878028713, 0.0, 0.31521029620664415,
           0.5253504936777402, 0.8405607898843844, 1.0507009873554805, 3.1521029620664414, 6.304205924132883],
          [0.08753061208026487, 0.646768603034814, 1.0663411530445053, 1.7580993408473766, 1.0507009873554805,
           1.0507009873554805, 1.0507009873554805, 1.0507009873554805, 1.0507009873554805, 1.0507009873554805]),
 'smooth_l1': ([2.5, 0.5, 0.125, 0.0, 0.045, 0.125, 0.32000000000000006, 0.5, 2.5, 5.5],
               [-1.0, -1.0, -0.5, 0.0, 0.3, 0.5, 0.8, 1.0, 1.0, 1.0]),
 'softshrink': ([-2.5, -0.5, 0.0, 0.0, 0.0, 0.0, 0.30000000000000004, 0.5, 2.5, 5.5],
                [1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0]),
 'softsign': ([-0.75, -0.5, -0.3333333333333333, 0.0, 0.23076923076923075, 0.3333333333333333, 0.4444444444444445,
               0.5, 0.75, 0.8571428571428571],
              [0.0625, 0.25, 0.4444444444444444, 1.0, 0.5917159763313609, 0.4444444444444444, 0.308641975308642, 0.25,
               0.0625, 0.020408163265306117]),
 'threshold': ([7.0, 7.0, 7.0, 7.0, 7.0, 0.5, 0.8, 1.0, 3.0, 6.0],
               [0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0])}


def _kink_values(lib):
    out = {}
    for name, fn in KINK_FNS:
        x = lib.tensor(KINK_POINTS, dtype=lib.float64, requires_grad=True)
        y = fn(lib.nn.functional, x)
        y.sum().backward()
        out[name] = (y.detach().numpy().tolist(), x.grad.numpy().tolist())
    return out


def test_gradients_at_the_kinks(reverse):
    got = _kink_values(tg)
    for name, (values, grads) in KINKS.items():
        np.testing.assert_allclose(got[name][0], values, rtol=1e-15, atol=0, err_msg=name)
        np.testing.assert_allclose(got[name][1], grads, rtol=1e-15, atol=0, err_msg=name)


def test_gradients_at_the_kinks_match_torch():
    torch = pytest.importorskip("torch")
    got, want = _kink_values(tg), _kink_values(torch)
    for name in want:
        np.testing.assert_allclose(got[name][0], want[name][0], rtol=1e-15, atol=0, err_msg=name)
        np.testing.assert_array_equal(got[name][1], want[name][1], err_msg=name)


# -- CTC ----------------------------------------------------------------------------------------------------
CTC_X = np.random.default_rng(0).standard_normal((12, 3, 5))
CTC_TARGETS = np.array([[1, 2, 2, 3], [4, 1, 0, 0], [3, 3, 3, 0]])
CTC_IN, CTC_LEN = np.array([12, 9, 10]), np.array([4, 2, 3])
# PyTorch 2.13: the per-sample losses, the gradient of their sum at (t=0, n=0), its sum of squares
CTC_LOSSES = [12.323369573699416, 9.484022046812076, 13.868605897000647]
CTC_GRAD00 = [-0.308673200046854, -0.3325748457807055, 0.3385957965196889, 0.19820156581408682, 0.1044506834937838]
CTC_GRAD_SQ = 13.666571948296395


def test_ctc_loss_values_and_gradient(reverse):
    x = tg.tensor(CTC_X, requires_grad=True)
    loss = F.ctc_loss(F.log_softmax(x, 2), tg.tensor(CTC_TARGETS), tg.tensor(CTC_IN), tg.tensor(CTC_LEN),
                      reduction="none")
    np.testing.assert_allclose(loss.detach().numpy(), CTC_LOSSES, rtol=1e-13)
    loss.sum().backward()
    np.testing.assert_allclose(x.grad.numpy()[0, 0], CTC_GRAD00, rtol=1e-12)
    np.testing.assert_allclose((x.grad.numpy() ** 2).sum(), CTC_GRAD_SQ, rtol=1e-12)
    assert (x.grad.numpy()[9:, 1] == 0).all()           # past sample 1's input length
    mean = F.ctc_loss(F.log_softmax(tg.tensor(CTC_X), 2), tg.tensor(CTC_TARGETS), CTC_IN.tolist(), CTC_LEN.tolist())
    np.testing.assert_allclose(mean.item(), np.mean(np.array(CTC_LOSSES) / CTC_LEN), rtol=1e-13)
    module = nn.CTCLoss(reduction="sum")
    np.testing.assert_allclose(module(F.log_softmax(tg.tensor(CTC_X), 2), tg.tensor(CTC_TARGETS), tg.tensor(CTC_IN),
                                      tg.tensor(CTC_LEN)).item(), sum(CTC_LOSSES), rtol=1e-13)


def test_ctc_loss_gradcheck_and_no_second_derivative():
    x = tg.tensor(CTC_X[:6, :2], requires_grad=True)
    targets, il, tl = tg.tensor([[1, 2], [3, 0]]), tg.tensor([6, 5]), tg.tensor([2, 1])
    assert tg.autograd.gradcheck(lambda z: F.ctc_loss(F.log_softmax(z, 2), targets, il, tl), (x,))
    loss = F.ctc_loss(F.log_softmax(x, 2), targets, il, tl)
    with pytest.raises(RuntimeError, match="derivative for aten::_ctc_loss_backward is not implemented"):
        tg.autograd.grad(loss, x, create_graph=True)


def test_ctc_loss_matches_torch_concatenated_targets_and_zero_infinity():
    torch = pytest.importorskip("torch")
    flat = np.concatenate([CTC_TARGETS[0, :4], CTC_TARGETS[1, :2], CTC_TARGETS[2, :3]])
    il = np.array([12, 9, 3])           # the third sample cannot align: an infinite loss
    for zero_infinity in (False, True):
        a = torch.tensor(CTC_X, requires_grad=True)
        la = torch.nn.functional.ctc_loss(a.log_softmax(2), torch.tensor(flat), torch.tensor(il), torch.tensor(CTC_LEN),
                                          reduction="sum", zero_infinity=zero_infinity)
        la.backward()
        b = tg.tensor(CTC_X, requires_grad=True)
        lb = F.ctc_loss(F.log_softmax(b, 2), tg.tensor(flat), tg.tensor(il), tg.tensor(CTC_LEN), reduction="sum",
                        zero_infinity=zero_infinity)
        lb.backward()
        assert la.item() == lb.item() or abs(la.item() - lb.item()) < 1e-12 * abs(la.item())
        np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), rtol=1e-12, atol=1e-14)     # (nan where torch's)
    with pytest.raises(RuntimeError, match="Expected input_lengths to have value at most 12, but got value 13"):
        F.ctc_loss(tg.tensor(CTC_X), tg.tensor(CTC_TARGETS), tg.tensor([13, 1, 1]), tg.tensor(CTC_LEN))


# -- cdist ------------------------------------------------------------------------------------------------
CDIST_ROW = [1.2428377700797004, 1.4474354192390444, 3.649762391288702, 1.1559277662388892, 1.5695606540126046]


def test_cdist_values_and_torch():
    rng = np.random.default_rng(0)
    rng.standard_normal((12, 3, 5))
    a, b = rng.standard_normal((2, 4, 3)), rng.standard_normal((2, 5, 3))
    np.testing.assert_allclose(tg.cdist(tg.tensor(a), tg.tensor(b)).numpy()[0, 0], CDIST_ROW, rtol=1e-14)
    torch = pytest.importorskip("torch")
    for P, p, mode in [(4, 2.0, "use_mm_for_euclid_dist_if_necessary"),
                       (30, 2.0, "use_mm_for_euclid_dist_if_necessary"),
                       (4, 1.0, "use_mm_for_euclid_dist_if_necessary"), (4, 3.5, "donot_use_mm_for_euclid_dist"),
                       (6, float("inf"), "donot_use_mm_for_euclid_dist"), (4, 2.0, "use_mm_for_euclid_dist")]:
        x1, x2 = rng.standard_normal((2, P, 3)), rng.standard_normal((2, 5, 3))
        x2[0, 0] = x1[0, 0]                 # a zero distance: PyTorch's gradient there is 0
        ta, tb = torch.tensor(x1, requires_grad=True), torch.tensor(x2, requires_grad=True)
        ga, gb = tg.tensor(x1, requires_grad=True), tg.tensor(x2, requires_grad=True)
        yt, yg = torch.cdist(ta, tb, p, mode), tg.cdist(ga, gb, p, mode)
        g = rng.standard_normal(tuple(yt.shape))
        (yt * torch.tensor(g)).sum().backward()
        (yg * tg.tensor(g)).sum().backward()
        np.testing.assert_allclose(yg.detach().numpy(), yt.detach().numpy(), rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(ga.grad.numpy(), ta.grad.numpy(), rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(gb.grad.numpy(), tb.grad.numpy(), rtol=1e-12, atol=1e-13)
    x, other = tg.tensor(rng.standard_normal((3, 2)), requires_grad=True), tg.tensor(rng.standard_normal((4, 2)))
    assert tg.autograd.gradcheck(lambda z: tg.cdist(z, other, 1.5), (x,))


def _print_expected():
    import torch
    print_expected(CASES)
    print("KINKS = %r" % (_kink_values(torch),))


if __name__ == "__main__":
    _print_expected()
